import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const signup = workflow('signup', { version: 1, input: z.object({ email: z.string() }) })
  .external('createCustomer', {
    output: z.object({ customerId: z.string() }),
    key: ({ input }) => `customer:${input.email}`,
    idempotentByKey: true,
  })
  .external('sendWelcome', {
    output: z.object({ messageId: z.string() }),
    key: ({ input }) => `welcome:${input.email}`,
  })
  .external('notifySales', {
    output: z.object({ ok: z.boolean() }),
    key: ({ input }) => `sales:${input.email}`,
    idempotentByKey: true,
  });
