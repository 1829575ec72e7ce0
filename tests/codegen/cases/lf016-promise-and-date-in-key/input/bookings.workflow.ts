import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

async function lookupRoom(id: string): Promise<string> {
  return id;
}

function roomFor(id: string): Promise<string> {
  return Promise.resolve(id);
}

export const bookings = workflow('bookings', {
  version: 1,
  input: z.object({ bookingId: z.string(), day: z.coerce.date(), checkIn: z.date() }),
})
  .external('hold', {
    output: z.object({ holdId: z.string() }),
    key: ({ input }) => `hold:${lookupRoom(input.bookingId)}`,
    idempotentByKey: true,
  })
  .external('pay', {
    output: z.object({ paymentId: z.string() }),
    key: ({ input }) => `pay:${input.bookingId}:${roomFor(input.bookingId)}`,
    idempotentByKey: true,
  })
  .external('remind', {
    output: z.object({ reminderId: z.string() }),
    key: ({ input }) => `remind:${input.bookingId}:${input.day}`,
    idempotentByKey: true,
  })
  .external('greet', {
    output: z.object({ greetingId: z.string() }),
    key: ({ input }) => `greet:${input.bookingId}:${new Date(input.checkIn.getTime())}`,
    idempotentByKey: true,
  });
