export function chargeKey(prefix: string, id: string): string {
  return `${prefix}:${id}`;
}
