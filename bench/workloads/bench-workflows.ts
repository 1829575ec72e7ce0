import type { Generated } from 'kysely';
import { z } from 'zod';
import { shapeHash, workflow } from '../../dsl/index.js';
import { bindHandlers, type WorkflowHandlers, type WorkflowRegistration } from '../../runtime/index.js';
import type { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';

/**
 * The benchmark's workflows. Handlers do no work of their own, so what is measured is
 * ledgerflow's cost: claims, commits and round trips.
 */
const input = z.object({ i: z.number().int().nonnegative() });
const fast = { maxAttempts: 3, initialDelayMs: 10, maxDelayMs: 100 } as const;

/** W0 and W1: one `transactional` step — the same rows W0 writes by hand. */
export const oneStep = workflow('bench-one-step', { version: 1, input }).transactional('commit', {
  output: z.object({ i: z.number() }),
  key: ({ input }) => `one:${input.i}`,
  retry: fast,
});

/** W2: `step` → `transactional` (writes an application row) → `external` (in-process deduping provider). */
export const threeStep = workflow('bench-three-step', { version: 1, input })
  .step('load', { output: z.object({ amountCents: z.number().int() }), retry: fast })
  .transactional('reserve', {
    output: z.object({ reservationId: z.number().int() }),
    key: ({ input }) => `reserve:${input.i}`,
    retry: fast,
  })
  .external('charge', {
    output: z.object({ chargeId: z.string() }),
    key: ({ input }) => `charge:${input.i}`,
    idempotentByKey: true,
    retry: fast,
  });

/** Cost of one step of each kind: single-step workflows. */
export const plainOnly = workflow('bench-kind-step', { version: 1, input }).step('compute', {
  output: z.object({ i: z.number() }),
  retry: fast,
});
export const externalOnly = workflow('bench-kind-external', { version: 1, input }).external('call', {
  output: z.object({ chargeId: z.string() }),
  key: ({ input }) => `call:${input.i}`,
  idempotentByKey: true,
  retry: fast,
});

/** W3: one `step`; its commit is the "first step" whose latency is measured. */
export const latencyProbe = workflow('bench-latency', { version: 1, input }).step('first', {
  output: z.object({ i: z.number() }),
  retry: fast,
});

export const BENCH_WORKFLOWS = [oneStep, threeStep, plainOnly, externalOnly, latencyProbe] as const;

export const BENCH_APP_SQL = `
CREATE SCHEMA IF NOT EXISTS bench_app;
CREATE TABLE IF NOT EXISTS bench_app.reservation (id bigserial PRIMARY KEY, run_id uuid NOT NULL, item integer NOT NULL);
`;

interface BenchAppDatabase {
  'bench_app.reservation': { id: Generated<number>; run_id: string; item: number };
}

export function benchRegistrations(payments: FakePaymentProvider): WorkflowRegistration[] {
  const charge = async (key: string, i: number): Promise<{ chargeId: string }> => {
    const charged = await payments.charge(
      { reference: `bench-${i}`, amountCents: 100 + i, currency: 'eur', customerId: 'bench' },
      { idempotencyKey: key },
    );
    return { chargeId: charged.id };
  };
  const one: WorkflowHandlers<typeof oneStep, BenchAppDatabase> = {
    commit: async (ctx) => ctx.record({ i: ctx.input.i }),
  };
  const three: WorkflowHandlers<typeof threeStep, BenchAppDatabase> = {
    load: ({ input }) => ({ amountCents: 100 + input.i }),
    reserve: async (ctx) => {
      const row = await ctx.tx
        .insertInto('bench_app.reservation')
        .values({ run_id: ctx.runId, item: ctx.input.i })
        .returning('id')
        .executeTakeFirstOrThrow();
      return ctx.record({ reservationId: row.id });
    },
    charge: { perform: ({ key, input }) => charge(key, input.i) },
  };
  const plain: WorkflowHandlers<typeof plainOnly> = { compute: ({ input }) => ({ i: input.i }) };
  const external: WorkflowHandlers<typeof externalOnly> = {
    call: { perform: ({ key, input }) => charge(key, input.i) },
  };
  const probe: WorkflowHandlers<typeof latencyProbe> = { first: ({ input }) => ({ i: input.i }) };
  return [
    bindHandlers(oneStep, one, shapeHash(oneStep)),
    bindHandlers(threeStep, three, shapeHash(threeStep)),
    bindHandlers(plainOnly, plain, shapeHash(plainOnly)),
    bindHandlers(externalOnly, external, shapeHash(externalOnly)),
    bindHandlers(latencyProbe, probe, shapeHash(latencyProbe)),
  ];
}
