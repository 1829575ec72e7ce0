import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import { OrderInput } from '@acme/schemas';

export const orders = workflow('orders', { version: 1, input: OrderInput })
  .step('load', { output: z.object({ customerId: z.string() }) });
