import { workflow } from 'ledgerflow/dsl'
import { z } from 'zod'

/** Orders: reformatted (quotes, semicolons, trailing commas, line breaks) and commented; nothing else. */
export const orders = workflow("orders", {
  version: 1,
  // what a run starts with
  input: z.object({
    orderId: z.string(),
    amountCents: z.number().int(), // in cents
  }),
})
  .step("load", {
    output: z.object({ "customerId": z.string() }),
  })
  .external("charge", {
    output: z.object({
      chargeId: z.string(),
    }),
    /* the provider dedupes by this key */
    key: ({ input, }) => `charge:${input.orderId}`,
    request: ({ input }) => ({
      amountCents: input.amountCents,
    }),
    idempotentByKey: true,
  })
  .transactional("record", {
    output: z.object({ paymentId: z.string() }),
    key: ({ input, steps }) =>
      `record:${input.orderId}:${steps.charge.chargeId}`,
  })
