import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';
import path from 'node:path';
const NON_ALNUM = /[^a-z0-9]/i;
const FORMAT = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

function joinWith(values: readonly string[], format: (value: string) => string): string {
  return values.map((value) => format(value)).join(',');
}

function id(strings: TemplateStringsArray, ...values: unknown[]): string {
  return String.raw({ raw: strings }, ...values);
}

function sortedSkus(items: readonly { sku: string; n: number }[]): string {
  return [...items].sort((a, b) => a.n - b.n || (a.sku < b.sku ? -1 : 1)).map((i) => i.sku).join(',');
}

export const orders = workflow('orders', { version: 1, input: z.object({ orderId: z.string(), at: z.string(), amountCents: z.number(), tags: z.array(z.string()), items: z.array(z.object({ sku: z.string(), n: z.number() })), meta: z.record(z.string(), z.string()) }) })
  .external('s1', { output: z.object({ id: z.string() }), key: ({ input }) => `y:${new Date(input.at).getUTCFullYear()}-${new Date(input.at).getUTCMonth() + 1}:${input.orderId}` })
  .external('s2', { output: z.object({ id: z.string() }), key: ({ input }) => [...input.items].sort((a, b) => a.n - b.n).map((i) => i.sku).join(',') })
  .external('s3', { output: z.object({ id: z.string() }), key: ({ input }) => `${new Set(input.tags).size}:${input.orderId}` })
  .external('s4', { output: z.object({ id: z.string() }), key: ({ input }) => [...new Set(input.tags)].join() })
  .external('s5', { output: z.object({ id: z.string() }), key: ({ input }) => JSON.stringify(structuredClone(input.items)) })
  .external('s6', { output: z.object({ id: z.string() }), key: ({ input }) => input.tags.toSorted().join('|') })
  .external('s7', { output: z.object({ id: z.string() }), key: ({ input }) => input.tags.toReversed().join('|') })
  .external('s8', { output: z.object({ id: z.string() }), key: ({ input }) => input.tags.slice().reverse().join('|') })
  .external('s9', { output: z.object({ id: z.string() }), key: ({ input }) => Object.entries(input.meta).map(([k, v]) => `${k}=${v}`).join('&') })
  .external('s10', { output: z.object({ id: z.string() }), key: ({ input }) => input.amountCents.toFixed(2).padStart(12, '0') })
  .external('s11', { output: z.object({ id: z.string() }), key: ({ input }) => String(Number(input.orderId)) })
  .external('s12', { output: z.object({ id: z.string() }), key: ({ input }) => `${Math.max(...input.items.map((i) => i.n))}:${Math.min(0, input.amountCents)}` })
  .external('s13', { output: z.object({ id: z.string() }), key: ({ input }) => `${new Map(input.items.map((i) => [i.sku, i.n])).size}:${input.orderId}` })
  .external('s14', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${input.amountCents.toLocaleString('en-US')}` })
  .external('s15', { output: z.object({ id: z.string() }), key: ({ input }) => new Intl.DateTimeFormat('en-US', { timeZone: 'UTC', dateStyle: 'short' }).format(new Date(input.at)) })
  .external('s16', { output: z.object({ id: z.string() }), key: ({ input }) => new Date(input.at).toLocaleDateString('de-DE', { timeZone: 'Europe/Berlin' }) })
  .external('s17', { output: z.object({ id: z.string() }), key: ({ input }) => Array.from(input.tags, (t) => t.toUpperCase()).join() })
  .external('s18', { output: z.object({ id: z.string() }), key: ({ input }) => input.tags.reduce((total, t) => total + t.length, 0).toString(16) })
  .external('s19', { output: z.object({ id: z.string() }), key: ({ input }) => encodeURIComponent(input.orderId).replaceAll('%', '_') })
  .external('s20', { output: z.object({ id: z.string() }), key: ({ input }) => Buffer.from(input.orderId).toString('base64url') })
  .external('s21', { output: z.object({ id: z.string() }), key: ({ input }) => {
    const seen = new Set<string>();
    const out: string[] = [];
    for (const t of input.tags) {
      if (!seen.has(t)) {
        seen.add(t);
        out.push(t);
      }
    }
    return out.join();
  } })
  .external('s22', { output: z.object({ id: z.string() }), key: ({ input }) => `${Date.UTC(Number(input.at.slice(0, 4)), 0, 1)}:${input.orderId}` })
  .external('s23', { output: z.object({ id: z.string() }), key: ({ input }) => String(new Date(input.at).getTime()) })
  .external('s24', { output: z.object({ id: z.string() }), key: ({ input }) => JSON.stringify(Object.fromEntries(Object.entries(input.meta).toSorted(([a], [b]) => (a < b ? -1 : 1)))) })
  .external('s25', { output: z.object({ id: z.string() }), key: ({ input }) => input.tags.toSorted((a, b) => a.localeCompare(b, 'en')).join() })
  .external('s26', { output: z.object({ id: z.string() }), key: ({ input }) => `${Reflect.ownKeys(input.meta).length}:${input.orderId}` })
  .external('s27', { output: z.object({ id: z.string() }), key: ({ input }) => sortedSkus(input.items) })
  .external('s28', { output: z.object({ id: z.string() }), key: ({ input }) => input.orderId.replace(NON_ALNUM, '').toLowerCase() })
  .external('s29', { output: z.object({ id: z.string() }), key: ({ input }) => {
    let total = 0;
    for (const item of input.items) total += item.n;
    return `${input.orderId}:${total}`;
  } })
  .external('s30', { output: z.object({ id: z.string() }), key: ({ input }) => new URLSearchParams(input.meta).toString() })
  .external('s31', { output: z.object({ id: z.string() }), key: ({ input }) => Number.parseInt(input.orderId, 10).toString(36) })
  .external('s32', { output: z.object({ id: z.string() }), key: ({ input }) => `${new TextEncoder().encode(input.orderId).length}:${Math.round(input.amountCents / 100)}` })
  .external('s33', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId.toLocaleLowerCase('en-US')}:${input.tags.length}` })
  .external('s34', { output: z.object({ id: z.string() }), key: ({ input }) => { const d = new Date(input.at); d.setUTCHours(0, 0, 0, 0); return `${input.orderId}:${d.toISOString()}`; } })
  .external('s35', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${FORMAT.format(input.amountCents)}` })
  .external('s36', { output: z.object({ id: z.string() }), key: ({ input }) => `${input.orderId}:${[3, 1, 2].sort().join()}:${Array.of(input.amountCents).flat().length}` })
  .external('s37', { output: z.object({ id: z.string() }), key: ({ input }) => joinWith(input.tags, (tag) => tag.trim().toLowerCase()) })
  .external('s38', { output: z.object({ id: z.string() }), key: ({ input }) => path.join('orders', input.orderId) })
  .external('s39', { output: z.object({ id: z.string() }), key: ({ input }) => id`order:${input.orderId}` });
