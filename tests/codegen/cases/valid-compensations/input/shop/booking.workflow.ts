import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const booking = workflow('booking', {
  version: 1,
  input: z.object({ bookingId: z.string(), seats: z.number().int().positive(), amountCents: z.number().int().positive() }),
  compensateOnCancel: true,
})
  .transactional('holdSeats', {
    output: z.object({ holdId: z.string() }),
    key: ({ input }) => `hold:${input.bookingId}`,
    compensate: {
      name: 'releaseSeats',
      output: z.object({ released: z.number() }),
      key: ({ steps }) => `release:${steps.holdSeats.holdId}`,
    },
  })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.bookingId}`,
    idempotentByKey: true,
    compensate: {
      name: 'refund',
      output: z.object({ refundId: z.string() }),
      key: ({ input, steps }) => `refund:${input.bookingId}:${steps.charge.chargeId}`,
      request: ({ input }) => ({ amountCents: input.amountCents }),
      idempotentByKey: true,
      retry: { maxAttempts: 10 },
    },
  })
  .external('notify', {
    output: z.object({ messageId: z.string() }),
    key: ({ input }) => `notify:${input.bookingId}`,
    when: ({ input }) => input.seats > 1,
    compensate: {
      name: 'sendApology',
      output: z.object({ messageId: z.string() }),
      key: ({ input }) => `apology:${input.bookingId}`,
    },
  });
