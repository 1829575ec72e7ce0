export let region = 'eu';

export function moveTo(next: string): void {
  region = next;
}
