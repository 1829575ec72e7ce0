import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

function makeCounter() {
  let calls = 0;
  return () => ++calls;
}
const nextCall = makeCounter();

function keys() {
  let attempt = 0;
  const key = ({ input }: { input: { orderId: string } }) => `${input.orderId}:${attempt}`;
  attempt++;
  return key;
}
const keyOf = keys();

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string() }) })
  .external('charge', { output: z.object({ id: z.string() }), key: ({ input }) => `charge:${input.orderId}:${nextCall()}` })
  .external('refund', { output: z.object({ id: z.string() }), key: ({ input }) => `refund:${input.orderId}:${keyOf({ input })}` });
