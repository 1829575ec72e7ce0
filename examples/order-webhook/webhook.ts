import type { Client, SentEvent } from 'ledgerflow/runtime';
import { paymentSettled } from './payment-settled.js';

/** The body the payment provider POSTs to the shop's webhook endpoint (after its signature was checked). */
export interface PaymentWebhookBody {
  /** The provider's id of this notification; it sends the same one again when it retries. */
  readonly eventId: string;
  readonly type: string;
  readonly data: { readonly reference: string; readonly chargeId: string; readonly amountCents: number };
}

/**
 * What the shop's webhook endpoint does with a notification: hand it to the order's run as
 * `payment.settled`, keyed by the order id. The provider's notification id is the dedupe key, so
 * a notification delivered twice (the provider retries until it gets a 2xx) is stored once; an
 * event that arrives before its order's run waits for it is kept until the run takes it.
 */
export async function receivePaymentWebhook(client: Client, body: PaymentWebhookBody): Promise<SentEvent | undefined> {
  if (body.type !== 'charge.succeeded') return undefined;
  const { reference, chargeId, amountCents } = body.data;
  return client.sendEvent(
    paymentSettled,
    reference,
    { orderId: reference, chargeId, amountCents },
    { dedupeKey: body.eventId },
  );
}
