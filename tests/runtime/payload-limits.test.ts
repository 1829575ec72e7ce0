import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { event, shapeHash, workflow, type AnyWorkflow } from 'ledgerflow/dsl';
import {
  bindHandlers,
  createClient,
  createWorker,
  found,
  NonRetryableError,
  PayloadTooLargeError,
  unknownOutcome,
  ValidationError,
  type Client,
  type WorkflowHandlers,
  type WorkflowRegistration,
  type Worker,
} from 'ledgerflow/runtime';
import {
  DEFAULT_PAYLOAD_LIMITS,
  MAX_JSON_DEPTH,
  readPayloadLimits,
  runReconcilePass,
  setPayloadLimits,
} from 'ledgerflow/operator';
import { configureFaults } from 'ledgerflow/testing';
import type { TestStore } from '../support/test-stores.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { runState, waitUntil } from './fixtures/run-helpers.js';

/**
 * Size limits (core 0014, `ledgerflow limits`) on both stores: inputs and event payloads over
 * their limit are refused before anything is sent, a step output over its limit fails the step
 * without retries, an error record over its limit is truncated, JSON nested too deep is refused
 * with a message instead of a stack overflow.
 */
const noRetry = { maxAttempts: 3, initialDelayMs: 10, maxDelayMs: 20, backoffFactor: 1, jitter: 0 } as const;

const blob = workflow('lim-blob', { version: 1, input: z.object({ blob: z.string() }) }).step('measure', {
  output: z.object({ length: z.number() }),
});
const tree = workflow('lim-tree', { version: 1, input: z.object({ tree: z.unknown() }) }).step('noop', {
  output: z.object({}),
});
const bigOutput = workflow('lim-big-output', { version: 1, input: z.object({ bytes: z.number() }) }).step('make', {
  output: z.object({ blob: z.string() }),
  retry: noRetry,
});
const loudError = workflow('lim-loud-error', { version: 1, input: z.object({ chars: z.number() }) }).step('fail', {
  output: z.object({}),
  retry: noRetry,
});
/** An external step whose provider, asked about an intent, answers what `lookup.answer` says. */
const bigFound = workflow('lim-big-found', { version: 1, input: z.object({ id: z.string() }) }).external('fetch', {
  output: z.object({ blob: z.string() }),
  key: ({ input }) => `fetch:${input.id}`,
  performTimeoutMs: 1_000,
  retry: noRetry,
});
const lookup: { answer: 'oversize' | 'unknown' } = { answer: 'oversize' };
/** Over the default 1 MiB output limit. */
const OVERSIZE = { blob: 'y'.repeat(1_100_000) };
const note = event('lim.note', z.object({ text: z.string() }));
const WORKFLOWS = [blob, tree, bigOutput, loudError, bigFound];

function bind<W extends AnyWorkflow>(w: W, handlers: WorkflowHandlers<W>): WorkflowRegistration {
  return bindHandlers(w, handlers, shapeHash(w));
}
const handlers = (): WorkflowRegistration[] => [
  bind(blob, { measure: ({ input }) => ({ length: input.blob.length }) }),
  bind(tree, { noop: () => ({}) }),
  bind(bigOutput, { make: ({ input }) => ({ blob: 'y'.repeat(input.bytes) }) }),
  bind(bigFound, {
    fetch: {
      perform: async () => ({ blob: 'sent' }),
      reconcile: async () => (lookup.answer === 'oversize' ? found(OVERSIZE) : unknownOutcome('the lookup is down')),
    },
  }),
  bind(loudError, {
    fail: ({ input }) => {
      throw new NonRetryableError(`boom ${'e'.repeat(input.chars)}`);
    },
  }),
];

/** `[[[…]]]`, `depth` arrays deep, built without recursion. */
function nested(depth: number): unknown {
  let value: unknown = [];
  for (let i = 1; i < depth; i++) value = [value];
  return value;
}

/** The rows a start or a send writes (the worker, meanwhile, writes attempts of earlier runs). */
async function rowCounts(store: TestStore): Promise<{ runs: number; events: number }> {
  const count = async (table: 'ledgerflow.workflow_run' | 'ledgerflow.event') =>
    Number(
      (
        await store.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  return { runs: await count('ledgerflow.workflow_run'), events: await count('ledgerflow.event') };
}

describeStores('payload limits', (getStore) => {
  let client: Client;
  let worker: Worker;
  beforeAll(async () => {
    await migrateForTest(getStore(), WORKFLOWS);
    client = createClient({ store: getStore(), workflows: WORKFLOWS });
    worker = createWorker({ store: getStore(), workflows: handlers(), pollIntervalMs: 20, reconcileIntervalMs: 0 });
    await worker.start();
  });
  afterAll(async () => {
    await worker.stop();
  });

  it('stores the defaults: 1 MiB for inputs, outputs and event payloads, 64 KiB for error records', async () => {
    const { updatedAt, ...limits } = await readPayloadLimits(getStore().db);
    expect(limits).toEqual(DEFAULT_PAYLOAD_LIMITS);
    expect(updatedAt).toBeInstanceOf(Date);
  });

  it('refuses a 100 MB input before anything is written or sent, without a second copy of it in memory', async () => {
    const input = { blob: 'x'.repeat(100 * 1024 * 1024) };
    // repeat() builds a rope; searching it flattens it into the 100 MB the input really is, so
    // that the growth measured below is the refusal's own, not the input's.
    expect(input.blob.indexOf('y')).toBe(-1);
    const before = await rowCounts(getStore());
    const rssBefore = process.memoryUsage().rss;
    const error = await client.start(blob, input).then(
      () => undefined,
      (e: unknown) => e,
    );
    const rssGrowth = process.memoryUsage().rss - rssBefore;
    expect(error).toBeInstanceOf(PayloadTooLargeError);
    const tooLarge = error as PayloadTooLargeError;
    expect(tooLarge.message).toBe(
      'The run input of workflow "lim-blob" v1 is 104857611 bytes of JSON; the limit is 1048576 ' +
        '(ledgerflow limits set --max-input-bytes <bytes>, or keep large data elsewhere and pass a reference). Nothing was written.',
    );
    expect({ kind: tooLarge.kind, bytes: tooLarge.bytes, limit: tooLarge.limit, code: tooLarge.code }).toEqual({
      kind: 'run input',
      bytes: 104_857_611,
      limit: 1_048_576,
      code: 'payload_too_large',
    });
    expect(await rowCounts(getStore())).toEqual(before);
    // Its JSON text would be another 100 MB; measuring it costs next to nothing. The bound leaves
    // room for what else this process allocates meanwhile (files share worker processes).
    expect(rssGrowth, `rss grew by ${rssGrowth} bytes`).toBeLessThan(64 * 1024 * 1024);
  });

  it('refuses an event payload over its limit, naming the limit, and stores nothing', async () => {
    const before = await rowCounts(getStore());
    const error = await client.sendEvent(note, 'k-1', { text: 'z'.repeat(2_000_000) }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PayloadTooLargeError);
    expect((error as Error).message).toContain(
      'The event payload of event "lim.note" is 2000011 bytes of JSON; the limit is 1048576',
    );
    expect((error as Error).message).toContain('ledgerflow limits set --max-event-payload-bytes <bytes>');
    expect(await rowCounts(getStore())).toEqual(before);
    const sent = await client.sendEvent(note, 'k-1', { text: 'fits' });
    expect(sent.created).toBe(true);
  });

  it('refuses JSON nested 100 000 levels deep with a message, not a stack overflow; accepts it at the depth limit', async () => {
    const before = await rowCounts(getStore());
    const error = await client.start(tree, { tree: nested(100_000) }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as Error).message).toBe(
      `The run input of workflow "lim-tree" v1 cannot be stored: it nests objects/arrays more than ${MAX_JSON_DEPTH} levels deep ` +
        `(or refers to itself); flatten it (at most ${MAX_JSON_DEPTH} levels). Nothing was written.`,
    );
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    await expect(client.start(tree, { tree: cyclic })).rejects.toThrow(/refers to itself/);
    expect(await rowCounts(getStore())).toEqual(before);
    // The input object is one level, so the tree may be MAX_JSON_DEPTH - 1 deep; both stores keep it whole.
    const deepest = nested(MAX_JSON_DEPTH - 1);
    const { runId } = await client.start(tree, { tree: deepest });
    const run = await client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    expect(run.status).toBe('completed');
    expect(run.input).toEqual({ tree: deepest });
    await expect(client.start(tree, { tree: nested(MAX_JSON_DEPTH) })).rejects.toThrow(ValidationError);
  });

  it('fails a step whose output is over the limit at once (not retried), with the error naming the limit', async () => {
    const { runId } = await client.start(bigOutput, { bytes: 1_100_000 });
    const run = await client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    expect(run.status).toBe('failed');
    expect(run.attempts).toHaveLength(1);
    expect(run.error).toMatchObject({
      name: 'PayloadTooLargeError',
      code: 'payload_too_large',
      message:
        'The step output of step "make" of workflow "lim-big-output" is 1100011 bytes of JSON; the limit is 1048576 ' +
        '(ledgerflow limits set --max-output-bytes <bytes>, or keep large data elsewhere and pass a reference). Nothing was written.',
    });
    expect(run.steps).toEqual([]);
    const small = await client.start(bigOutput, { bytes: 1_000 });
    expect((await client.waitForRun(small.runId, { timeoutMs: 20_000, pollMs: 20 })).status).toBe('completed');
  });

  it('an output found by a lookup is held to the size limit on every path: worker, reconciler and operator park or refuse it, never record it', async () => {
    const store = getStore();
    const NOTE = { actor: 'ana', reason: 'checked at the provider' };
    lookup.answer = 'oversize';
    // The attempt fails right after perform: its intent is due at once, and the next attempt asks the provider.
    configureFaults({ seed: 3, points: { 'after-perform': { probability: 1, actions: ['throw'], times: 1 } } });
    try {
      const { runId } = await client.start(bigFound, { id: 'f-1' });
      // The worker's own lookup: the output is over the limit, so the step fails while its intent is open, and the run parks.
      const parked = await waitUntil('the run parks', async () => {
        const state = await runState(store, runId);
        return state.run.status === 'needs_reconciliation' ? state : undefined;
      });
      expect(JSON.stringify(parked.run.error)).toContain('the limit is 1048576');
      expect(parked.effects.map((e) => e.status)).toEqual(['intent']);

      // The reconciler asks again and gets the same answer: parked as the worker left it, nothing recorded.
      const report = await runReconcilePass({
        store,
        workflows: handlers(),
        now: new Date(Date.now() + 3_600_000),
        leaseMs: 5_000,
      });
      expect(report).toMatchObject({ examined: 1, recorded: 0, parked: 1 });
      expect(report.items[0]!.detail).toContain('is 1100011 bytes of JSON; the limit is 1048576');
      const after = await runState(store, runId);
      expect(after.run.status).toBe('needs_reconciliation');
      expect(after.run.error).toMatchObject({
        name: 'NeedsReconciliation',
        message: expect.stringContaining('the limit is 1048576'),
      });
      expect(after.effects.map((e) => e.status)).toEqual(['intent']);
      expect(after.results).toEqual([]);

      // The operator's answer is held to the same limit: refused, nothing written, no audit row.
      const audits = (await client.listAudit({ runId })).length;
      const refused = await client.resolveEffect(runId, 'fetch', { found: OVERSIZE }, NOTE).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(PayloadTooLargeError);
      expect((refused as Error).message).toBe(
        'The step output of step "fetch" of workflow "lim-big-found" is 1100011 bytes of JSON; the limit is 1048576 ' +
          '(ledgerflow limits set --max-output-bytes <bytes>, or keep large data elsewhere and pass a reference). Nothing was written.',
      );
      expect((await client.listAudit({ runId })).length).toBe(audits);
      expect((await runState(store, runId)).effects.map((e) => e.status)).toEqual(['intent']);
      await expect(client.resolveEffect(runId, 'fetch', { found: { blob: 42 } }, NOTE)).rejects.toThrow(
        ValidationError,
      );

      await client.resolveEffect(runId, 'fetch', { found: { blob: 'sent' } }, NOTE);
      const done = await client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
      expect(done).toMatchObject({ status: 'completed', output: { fetch: { blob: 'sent' } } });
    } finally {
      configureFaults(undefined);
    }
  });

  it('the intent of a run that is over, found with an oversize output, stays open (deferred), not recorded', async () => {
    const store = getStore();
    lookup.answer = 'unknown';
    configureFaults({ seed: 4, points: { 'after-perform': { probability: 1, actions: ['throw'], times: 1 } } });
    let runId: string;
    try {
      runId = (await client.start(bigFound, { id: 'f-2' })).runId;
      await waitUntil(
        'the run parks',
        async () => (await runState(store, runId)).run.status === 'needs_reconciliation',
      );
    } finally {
      configureFaults(undefined);
    }
    expect(await client.cancel(runId)).toBe(true);
    lookup.answer = 'oversize';
    const report = await runReconcilePass({
      store,
      workflows: handlers(),
      now: new Date(Date.now() + 3_600_000),
      leaseMs: 5_000,
    });
    expect(report).toMatchObject({ examined: 1, recorded: 0, deferred: 1 });
    expect(report.items[0]!.detail).toContain('the limit is 1048576');
    const state = await runState(store, runId);
    expect(state.run.status).toBe('cancelled');
    expect(state.effects.map((e) => e.status)).toEqual(['intent']);
  });

  it('truncates an error record over its limit, with a marker, instead of refusing it', async () => {
    const { runId } = await client.start(loudError, { chars: 500_000 });
    const run = await client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
    expect(run.status).toBe('failed');
    const stored = await getStore()
      .db.selectFrom('ledgerflow.step_attempt')
      .select((eb) => eb.fn<number>('octet_length', [eb.cast('error', 'text')]).as('bytes'))
      .where('run_id', '=', runId)
      .executeTakeFirstOrThrow();
    expect(Number(stored.bytes)).toBeLessThanOrEqual(DEFAULT_PAYLOAD_LIMITS.maxErrorBytes);
    const error = run.error as { name: string; message: string; truncated: { bytes: number; limit: number } };
    expect(error.name).toBe('NonRetryableError');
    expect(error.message).toMatch(/^boom e+… \[\d+ more characters cut, over the error record limit\]$/);
    expect(error.truncated.limit).toBe(DEFAULT_PAYLOAD_LIMITS.maxErrorBytes);
    expect(error.truncated.bytes).toBeGreaterThan(500_000);
  });

  it('applies limits changed in the database to clients and workers that read them afterwards, and refuses invalid ones', async () => {
    const store = getStore();
    await expect(setPayloadLimits(store.db, { maxInputBytes: 10 })).rejects.toThrow(
      'maxInputBytes: must be a whole number of bytes from 64 to 268435456 (got 10)',
    );
    try {
      await setPayloadLimits(store.db, { maxInputBytes: 256, maxEventPayloadBytes: 128 });
      const fresh = createClient({ store, workflows: WORKFLOWS });
      await expect(fresh.start(blob, { blob: 'b'.repeat(300) })).rejects.toThrow(
        /is 311 bytes of JSON; the limit is 256 \(ledgerflow limits set --max-input-bytes/,
      );
      await expect(fresh.sendEvent(note, 'k-2', { text: 't'.repeat(200) })).rejects.toThrow(PayloadTooLargeError);
      const { runId } = await fresh.start(blob, { blob: 'b'.repeat(200) });
      expect((await fresh.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).status).toBe('completed');
    } finally {
      await setPayloadLimits(store.db, {
        maxInputBytes: DEFAULT_PAYLOAD_LIMITS.maxInputBytes,
        maxEventPayloadBytes: DEFAULT_PAYLOAD_LIMITS.maxEventPayloadBytes,
      });
    }
  });

  it('property: an input within the limit is stored whole, one over it is refused and nothing written', async () => {
    const store = getStore();
    const limit = 512;
    await setPayloadLimits(store.db, { maxInputBytes: limit });
    try {
      const fresh = createClient({ store, workflows: WORKFLOWS });
      await fc.assert(
        fc.asyncProperty(fc.jsonValue({ maxDepth: 6 }), fc.nat({ max: 600 }), async (value, padding) => {
          // U+0000 is jsonb's own refusal, covered by start-input.property.test.ts.
          fc.pre(!JSON.stringify(value).includes('\\u0000'));
          const input = { tree: [value, 'p'.repeat(padding)] };
          const size = Buffer.byteLength(JSON.stringify(input));
          const before = await rowCounts(store);
          const outcome = await fresh.start(tree, input).catch((e: unknown) => e);
          if (size <= limit) {
            expect(outcome).toHaveProperty('runId');
            const row = await store.db
              .selectFrom('ledgerflow.workflow_run')
              .select('input')
              .where('id', '=', (outcome as { runId: string }).runId)
              .executeTakeFirstOrThrow();
            expect(row.input).toEqual(JSON.parse(JSON.stringify(input)));
          } else {
            expect(outcome).toBeInstanceOf(PayloadTooLargeError);
            expect((outcome as PayloadTooLargeError).bytes).toBe(size);
            expect(await rowCounts(store)).toEqual(before);
          }
        }),
        { numRuns: 60 },
      );
    } finally {
      await setPayloadLimits(store.db, { maxInputBytes: DEFAULT_PAYLOAD_LIMITS.maxInputBytes });
    }
  });
});
