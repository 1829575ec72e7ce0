import { sql } from 'kysely';
import { z } from 'zod';
import { event, schedule, shapeHash, workflow, type AnyWorkflow } from 'ledgerflow/dsl';
import { bindHandlers, found, notFound, type WorkflowHandlers, type WorkflowRegistration } from 'ledgerflow/runtime';

/** Workflows of the testing kit's own tests (tests/testing): names start with `kit-`. */
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

export const settled = event('kit.settled', z.object({ orderId: z.string() }));

/** Fails its first attempt; the retry is due an hour later. */
export const flaky = workflow('kit-flaky', { version: 1, input: z.object({ id: z.string() }) }).step('call', {
  output: z.object({ attempt: z.number() }),
  retry: { maxAttempts: 3, initialDelayMs: HOUR, maxDelayMs: HOUR, backoffFactor: 1, jitter: 0 },
});

/** Sleeps a day. */
export const napper = workflow('kit-napper', { version: 1, input: z.object({ id: z.string() }) })
  .sleep('nap', { for: () => DAY })
  .step('after', { output: z.object({ woke: z.boolean() }) });

/** Waits an hour at most for its order's event. */
export const awaitSettled = workflow('kit-await', { version: 1, input: z.object({ orderId: z.string() }) })
  .waitFor('settled', { event: settled, match: ({ input }) => input.orderId, timeoutMs: HOUR })
  .step('outcome', { output: z.object({ status: z.string() }) });

/** Waits forever for an event, under a one-hour workflow deadline. */
export const deadlined = workflow('kit-deadlined', {
  version: 1,
  input: z.object({ orderId: z.string() }),
  timeoutMs: HOUR,
})
  .waitFor('settled', { event: settled, match: ({ input }) => input.orderId })
  .step('outcome', { output: z.object({ status: z.string() }) });

/** Charges through a provider that does not dedupe (a crash after the call is settled by `reconcile`), then notes it in app.note. */
export const charge = workflow('kit-charge', {
  version: 1,
  input: z.object({ orderId: z.string(), cents: z.number() }),
})
  .external('charge', { output: z.object({ chargeId: z.string() }), key: ({ input }) => `charge:${input.orderId}` })
  .transactional('note', {
    output: z.object({ chargeId: z.string() }),
    key: ({ steps }) => `note:${steps.charge.chargeId}`,
  });

export const KIT_WORKFLOWS: readonly AnyWorkflow[] = [flaky, napper, awaitSettled, deadlined, charge];

/** A provider that applies each call and can be searched by the reference (the key) it was given. */
export class FakeProvider {
  readonly charges = new Map<string, { id: string; cents: number }>();
  readonly byReference = new Map<string, string[]>();
  calls = 0;
  charge(reference: string, cents: number): { id: string } {
    this.calls += 1;
    const id = `ch_${this.calls}`;
    this.charges.set(id, { id, cents });
    this.byReference.set(reference, [...(this.byReference.get(reference) ?? []), id]);
    return { id };
  }
}

function bind<W extends AnyWorkflow>(w: W, handlers: WorkflowHandlers<W>): WorkflowRegistration<W> {
  return bindHandlers(w, handlers, shapeHash(w));
}

export function kitRegistrations(
  provider: () => FakeProvider,
  flakyFailures: { remaining: number },
): WorkflowRegistration[] {
  return [
    bind(flaky, {
      call: ({ attempt }) => {
        if (flakyFailures.remaining > 0) {
          flakyFailures.remaining -= 1;
          throw new Error('the service is down');
        }
        return { attempt };
      },
    }),
    bind(napper, { after: () => ({ woke: true }) }),
    bind(awaitSettled, { outcome: ({ steps }) => ({ status: steps.settled.status }) }),
    bind(deadlined, { outcome: ({ steps }) => ({ status: steps.settled.status }) }),
    bind(charge, {
      charge: {
        perform: async ({ key, input }) => ({ chargeId: provider().charge(key, input.cents).id }),
        reconcile: async ({ key }) => {
          const [id] = provider().byReference.get(key) ?? [];
          return id === undefined ? notFound() : found({ chargeId: id });
        },
      },
      // Writes to the app's table (app.note, created by the test's migration) in the step's transaction.
      note: async (ctx) => {
        await sql`INSERT INTO app.note (id) VALUES (${ctx.key})`.execute(ctx.tx);
        return ctx.record({ chargeId: ctx.steps.charge.chargeId });
      },
    }),
  ];
}

/** Started by the daily schedule below; echoes its tick. */
export const nightly = workflow('kit-nightly', { version: 1, input: z.object({ night: z.string() }) }).step('echo', {
  output: z.object({ night: z.string() }),
});

export const nightlySchedule = schedule('kit-nightly', {
  cron: '0 3 * * *',
  timezone: 'UTC',
  workflow: nightly,
  input: ({ scheduledAt }) => ({ night: scheduledAt }),
});

/** Its step waits until the test opens the gate. */
export const stuck = workflow('kit-stuck', { version: 1, input: z.object({ id: z.string() }) }).step('wait', {
  output: z.object({ ok: z.boolean() }),
});

export function scheduleRegistrations(gate: Promise<void>): WorkflowRegistration[] {
  return [
    bind(nightly, { echo: ({ input }) => ({ night: input.night }) }),
    bind(stuck, {
      wait: async () => {
        await gate;
        return { ok: true };
      },
    }),
  ];
}
