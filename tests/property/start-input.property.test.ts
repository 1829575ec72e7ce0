import fc from 'fast-check';
import { beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow } from 'ledgerflow/dsl';
import { createClient, ValidationError, type Client } from 'ledgerflow/runtime';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';

/**
 * Whatever a caller passes to `start`, exactly one of two things happens: the input is
 * accepted and the run row holds all of it, as the schema parsed it (defaults included); or
 * it is rejected with a ValidationError that names what to fix, and nothing is written.
 * Accepted means: the schema accepts it and PostgreSQL can store it (jsonb refuses U+0000 and
 * unpaired surrogates, which `JSON.stringify` writes as \u0000 and \udXXX escapes).
 */
const UNSTORABLE_ESCAPE = /\\u0000|\\ud[89a-f][0-9a-f]{2}/i;
const order = workflow('prop-start-order', {
  version: 1,
  input: z.object({
    orderId: z.string().min(1).max(40),
    amountCents: z.number().int().positive().max(10_000_000),
    currency: z.enum(['eur', 'usd', 'gbp']),
    items: z
      .array(z.object({ sku: z.string().min(1).max(20), quantity: z.number().int().min(1).max(99) }))
      .min(1)
      .max(4),
    note: z.string().max(80).optional(),
    giftWrap: z.boolean().default(false),
    ratio: z.number().min(0).max(1).optional(),
  }),
}).step('noop', { output: z.object({}) });

const text = (maxLength: number) => fc.string({ unit: 'binary', maxLength });

const validOrder = fc.record(
  {
    orderId: text(40).filter((s) => s.length >= 1),
    amountCents: fc.integer({ min: 1, max: 10_000_000 }),
    currency: fc.constantFrom('eur', 'usd', 'gbp'),
    items: fc.array(
      fc.record({ sku: text(20).filter((s) => s.length >= 1), quantity: fc.integer({ min: 1, max: 99 }) }),
      {
        minLength: 1,
        maxLength: 4,
      },
    ),
    note: text(80),
    giftWrap: fc.boolean(),
    ratio: fc.double({ min: 0, max: 1, noNaN: true }),
  },
  { requiredKeys: ['orderId', 'amountCents', 'currency', 'items'] },
);

/** Valid orders with one field replaced by something else: often invalid, sometimes not. */
const nearlyValidOrder = fc
  .tuple(
    validOrder,
    fc.constantFrom('orderId', 'amountCents', 'currency', 'items', 'note', 'giftWrap', 'ratio', 'extra'),
    fc.anything(),
  )
  .map(([valid, field, value]) => ({ ...valid, [field]: value }));

const anyInput = fc.oneof(validOrder, nearlyValidOrder, fc.anything(), fc.object());

describeStores('start: arbitrary inputs', (getStore) => {
  let client: Client;
  beforeAll(async () => {
    await migrateForTest(getStore(), [order]);
    client = createClient({ store: getStore() });
  });
  const counts = async () => {
    const db = getStore().db;
    const [runs] = await db
      .selectFrom('ledgerflow.workflow_run')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .execute();
    return Number(runs!.n);
  };

  it('accepts and persists the parsed input whole, or rejects it with a ValidationError and writes nothing', async () => {
    await fc.assert(
      fc.asyncProperty(anyInput, async (input) => {
        const parsed = order.input.safeParse(input);
        const storable = parsed.success && !UNSTORABLE_ESCAPE.test(JSON.stringify(parsed.data));
        const before = await counts();
        let outcome: { runId: string } | { error: unknown };
        try {
          outcome = await client.start(order, input as z.input<typeof order.input>);
        } catch (error) {
          outcome = { error };
        }
        if (parsed.success && storable) {
          expect(
            outcome,
            `a valid input was refused: ${'error' in outcome ? String(outcome.error) : ''}`,
          ).toHaveProperty('runId');
          const runId = (outcome as { runId: string }).runId;
          const row = await getStore()
            .db.selectFrom('ledgerflow.workflow_run')
            .select(['input', 'status', 'workflow_name'])
            .where('id', '=', runId)
            .executeTakeFirstOrThrow();
          expect(row.status).toBe('pending');
          expect(row.input).toEqual(JSON.parse(JSON.stringify(parsed.data)));
          expect(await counts()).toBe(before + 1);
        } else {
          expect(outcome).toHaveProperty('error');
          const error = (outcome as { error: unknown }).error;
          expect(error).toBeInstanceOf(ValidationError);
          expect((error as ValidationError).issues.length).toBeGreaterThan(0);
          expect(await counts()).toBe(before);
        }
      }),
      { numRuns: 150 },
    );
  });
});
