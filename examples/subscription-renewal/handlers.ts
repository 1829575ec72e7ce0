import type { WorkflowRegistration } from 'ledgerflow/runtime';
import { subscriptionRenewalHandlers } from '../../generated/contracts/subscription-renewal.v1.js';
import type { PaymentGateway } from '../fakes/payment-provider.js';
import type { subscriptionRenewal } from './subscription-renewal.workflow.js';

/** `subscription-renewal` bound to its handler; `untilRenewal` is a built-in step and has none. */
export function subscriptionRenewalRegistration(services: {
  readonly payments: PaymentGateway;
}): WorkflowRegistration<typeof subscriptionRenewal> {
  return subscriptionRenewalHandlers({
    chargeRenewal: {
      async perform({ key, input }) {
        const charge = await services.payments.charge(
          {
            reference: input.subscriptionId,
            amountCents: input.amountCents,
            currency: input.currency,
            customerId: input.customerId,
          },
          { idempotencyKey: key },
        );
        return { chargeId: charge.id, amountCents: charge.amountCents };
      },
    },
  });
}
