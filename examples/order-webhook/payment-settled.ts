import { event } from 'ledgerflow/dsl';
import { z } from 'zod';

/**
 * The payment provider's webhook, as the workflows see it: a payment for an order settled. Its
 * correlation key is the order id, so the order's run takes it whether it arrives before or
 * after the run started waiting. Declared once, imported by the workflow and by the webhook.
 */
export const paymentSettled = event(
  'payment.settled',
  z.object({
    orderId: z.string().min(1),
    chargeId: z.string().min(1),
    amountCents: z.number().int().positive(),
  }),
);
