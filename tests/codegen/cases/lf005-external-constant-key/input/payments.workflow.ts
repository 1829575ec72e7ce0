import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const PREFIX = 'charge';

export const payments = workflow('payments', { version: 1, input: z.object({ orderId: z.string(), amountCents: z.number() }) })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: () => `${PREFIX}:daily`,
    idempotentByKey: true,
    compensate: {
      name: 'refund',
      output: z.object({ refundId: z.string() }),
      key: ({}) => 'refund',
      idempotentByKey: true,
    },
  })
  .external('notify', {
    output: z.object({ messageId: z.string() }),
    key: function notifyKey() {
      return 'notify';
    },
    idempotentByKey: true,
  });
