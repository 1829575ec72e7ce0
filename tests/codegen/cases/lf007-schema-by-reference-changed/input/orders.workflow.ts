import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { ChargeOutput, OrderInput } from './schemas.js';

const RecordOutput = z.object({ paymentId: z.string(), receiptId: z.string() });

export const orders = workflow('orders', { version: 1, input: OrderInput })
  .external('charge', {
    output: ChargeOutput,
    key: ({ input }) => `charge:${input.orderId}`,
    idempotentByKey: true,
  })
  .transactional('record', {
    output: RecordOutput,
    key: ({ input, steps }) => `record:${input.orderId}:${steps.charge.chargeId}`,
  });
