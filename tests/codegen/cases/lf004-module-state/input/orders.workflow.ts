import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
const cache = new Map<string, number>();
const seen = new Set<string>();
const DIGITS = /\d+/g;
const queue: string[] = [];

class Config {
  static prefix = 'ord';
}

class Counter {
  #n = 0;
  next(): number {
    return ++this.#n;
  }
}
const counter = new Counter();

function lookup(id: string): number | undefined {
  return cache.get(id);
}

function* sequence() {
  let i = 0;
  while (true) yield i++;
}
const ids = sequence();

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), at: z.string(), amountCents: z.number(), tags: z.array(z.string()), items: z.array(z.object({ sku: z.string(), n: z.number() })), meta: z.record(z.string(), z.string()) }) })
  .external('s1', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${cache.get(input.orderId)}` })
  .external('s2', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${seen.has(input.orderId)}` })
  .external('s3', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${DIGITS.test(input.orderId)}` })
  .external('s4', { output: z.object({ id: z.string() }), key: ({ input }) => `${Config.prefix}:${input.orderId}` })
  .external('s5', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${counter.next()}` })
  .external('s6', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${queue.join()}` })
  .external('s7', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${lookup(input.orderId)}` })
  .external('s8', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${ids.next().value}` });
