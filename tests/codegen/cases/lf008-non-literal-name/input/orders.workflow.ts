import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const name = 'orders';

export const orders = workflow(name, { version: 1, input: z.object({ orderId: z.string() }) })
  .step('load', { output: z.object({ customerId: z.string() }) });
