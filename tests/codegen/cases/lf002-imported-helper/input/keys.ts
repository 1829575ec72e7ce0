export function chargeKey(orderId: string): string {
  return `charge:${orderId}:${Date.now()}`;
}
