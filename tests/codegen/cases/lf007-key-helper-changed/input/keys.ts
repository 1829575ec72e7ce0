/** The charge's key, shared by the workflows that charge. */
export function chargeKey(orderId: string): string {
  return `charge-${orderId}`;
}
