import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const VERSION = 2;

export const orders = workflow('orders', { version: VERSION, input: z.object({ orderId: z.string() }) })
  .step('load', { output: z.object({ customerId: z.string() }) });
