import { z } from 'zod';
import { event, queue, workflow, type AnyWorkflow, type QueueDefinition } from 'ledgerflow/dsl';
import { seededRandom, type SeededRandom } from '../chaos/seeded-random.js';

/**
 * The composition fuzzer's model: `composeWorkflows(seed)` is a pure function from a seed to a
 * small set of workflows (a root and the child it starts), the runs to start and what each of
 * their steps must return. The test process and every worker child process call it with the same
 * seed and get the same definitions, so nothing is generated to disk: the versions are migrated
 * with codegen's `workflowVersionSql` (tests/support/migrate-for-test.ts) and the handlers are
 * bound in the worker (fuzz-handlers.ts).
 *
 * Constructs drawn: plain steps (some returning keys in an order jsonb does not keep),
 * transactional and external steps (idempotent by key, reconciled by lookup, or reconciled
 * "unknown" so that they park for an operator's resolve), compensations, `when`, sleeps, waits
 * for an event (with a timeout), a child, a forEach, a step failing for good on its first attempt
 * (an operator's retry then completes it), a failing child, a workflow deadline, and a queue with
 * concurrency, rate and partition limits, held by the whole run or by single steps.
 */

/** How an external step settles an interrupted attempt. */
export type ExternalMode = 'idempotent' | 'reconcile' | 'unknown';

export type StepPlan =
  | {
      readonly kind: 'compute';
      readonly name: string;
      readonly when?: number;
      readonly queued: boolean;
      /** Returns `{ zlong_first, k }`: jsonb stores it as `{ k, zlong_first }`. */
      readonly shuffled: boolean;
      /** Throws a NonRetryableError on its first attempt (the run fails or compensates; a retry completes it). */
      readonly failFirst: boolean;
    }
  | {
      readonly kind: 'transactional' | 'external';
      readonly name: string;
      readonly when?: number;
      readonly queued: boolean;
      readonly mode: ExternalMode;
      readonly compensate: boolean;
      /** An earlier step whose output is serialised into the key (`Object.values(...).join`). */
      readonly keyFrom?: string;
      /** The first attempt fails retryably before it reaches the provider. */
      readonly failFirst: boolean;
      /** The test kills the worker right after the provider applied the effect (first attempt). */
      readonly killAfterApply: boolean;
      /** The provider's answer is this many bytes larger than max_output_bytes allows. */
      readonly oversized: boolean;
    }
  | { readonly kind: 'sleep'; readonly name: string; readonly when?: number; readonly ms: number }
  | { readonly kind: 'wait'; readonly name: string; readonly when?: number; readonly timeoutMs: number }
  | { readonly kind: 'child'; readonly name: string; readonly when?: number }
  | {
      readonly kind: 'forEach';
      readonly name: string;
      readonly when?: number;
      readonly items: number;
      readonly concurrency: number;
    };

export interface QueuePlan {
  readonly definition: QueueDefinition;
  /** The root workflow's runs hold it from first step to finish (else single steps do). */
  readonly wholeRun: boolean;
  readonly partitioned: boolean;
}

export interface RunPlan {
  readonly tag: string;
  /** Bit i on: the steps with `when: i` run. */
  readonly flags: number;
  /** Partition key when the queue is partitioned. */
  readonly part: string;
  /** The child runs of this run fail for good at their last step (index 0 of a forEach, the child). */
  readonly failKids: boolean;
  /** When the driver sends the run's event (ms after start), or undefined: never (the wait times out). */
  readonly eventAtMs: number | undefined;
}

export interface KidPlan {
  /** The kid has an external effect with a compensation before its last step. */
  readonly effect: boolean;
}

export interface Composition {
  readonly seed: number;
  readonly root: AnyWorkflow;
  readonly kid: AnyWorkflow;
  readonly steps: readonly StepPlan[];
  readonly kidPlan: KidPlan;
  readonly queue: QueuePlan | undefined;
  readonly deadlineMs: number | undefined;
  readonly runs: readonly RunPlan[];
  readonly eventName: string;
}

/** Every composition's limit on a recorded output (set on the batch's database). */
export const FUZZ_MAX_OUTPUT_BYTES = 4_096;
/** The worker's lease: short, so that SIGSTOPped workers lose theirs within a composition. */
export const FUZZ_LEASE_MS = 1_500;
/** An external step's perform timeout: the reconciler looks at an intent after lease + this. */
export const FUZZ_PERFORM_TIMEOUT_MS = 800;

const RETRY = { maxAttempts: 8, initialDelayMs: 20, maxDelayMs: 200, backoffFactor: 2, jitter: 0.5 } as const;

const FuzzInput = z.object({ tag: z.string(), flags: z.number().int(), part: z.string(), failKids: z.boolean() });
const KidInput = z.object({ tag: z.string(), fail: z.boolean() });
export type FuzzInput = z.output<typeof FuzzInput>;
export type KidInput = z.output<typeof KidInput>;

const PlainOutput = z.object({ v: z.string() });
const ShuffledOutput = z.object({ zlong_first: z.string(), k: z.number() });
const EffectOutput = z.object({ ref: z.string(), pad: z.string() });
const UndoOutput = z.object({ undone: z.string() });

export function rootName(seed: number): string {
  return `fz${seed}-root`;
}

export function kidName(seed: number): string {
  return `fz${seed}-kid`;
}

/** The key of an effect step for a run, as the model predicts it (handler order of outputs). */
export function effectKey(tag: string, step: string, from: unknown): string {
  return from === undefined ? `${tag}/${step}` : `${tag}/${step}/${Object.values(from as object).join(':')}`;
}

/** What the model says a plain step returns. */
export function computeOutput(tag: string, plan: { readonly name: string; readonly shuffled: boolean }): unknown {
  return plan.shuffled ? { zlong_first: `${tag}:${plan.name}`, k: tag.length } : { v: `${tag}:${plan.name}` };
}

/** What the provider (or the transaction) answers for an effect key. */
export function effectOutput(key: string, oversized: boolean): { ref: string; pad: string } {
  return { ref: `ref:${key}`, pad: oversized ? 'x'.repeat(FUZZ_MAX_OUTPUT_BYTES + 100) : '' };
}

/** The kid's last output, what a parent's child step (or forEach item) receives. */
export function kidOutput(kidTag: string): unknown {
  return { v: `${kidTag}:kdone` };
}

export function kidTags(tag: string, plan: StepPlan): string[] {
  if (plan.kind === 'child') return [`${tag}.${plan.name}`];
  if (plan.kind === 'forEach') return Array.from({ length: plan.items }, (_, i) => `${tag}.${plan.name}.${i}`);
  return [];
}

export function composeWorkflows(seed: number): Composition {
  const random = seededRandom(seed);
  const chance = (p: number): boolean => random.next() < p;
  const eventName = `fz${seed}.go`;
  const go = event(eventName, z.object({ note: z.string() }));

  const queuePlan: QueuePlan | undefined = chance(0.5)
    ? (() => {
        const partitioned = chance(0.4);
        const limits = {
          ...(chance(0.8) ? { concurrency: random.int(1, 2) } : {}),
          ...(chance(0.35) ? { rateLimit: { limit: random.int(1, 2), periodMs: random.int(1_000, 1_500) } } : {}),
          ...(partitioned ? { partition: { concurrency: 1 } } : {}),
        };
        return { definition: queue(`fz${seed}-q`, limits), wholeRun: chance(0.3), partitioned };
      })()
    : undefined;

  const kidPlan: KidPlan = { effect: chance(0.6) };
  let kid: AnyWorkflow = workflow(kidName(seed), { version: 1, input: KidInput }) as unknown as AnyWorkflow;
  if (kidPlan.effect) {
    kid = loose(kid).external('keffect', {
      output: EffectOutput,
      key: ({ input }: { input: KidInput }) => `${input.tag}/keffect`,
      idempotentByKey: true,
      performTimeoutMs: FUZZ_PERFORM_TIMEOUT_MS,
      retry: RETRY,
      compensate: {
        name: 'kundo',
        key: ({ input }: { input: KidInput }) => `${input.tag}/kundo`,
        output: UndoOutput,
        performTimeoutMs: FUZZ_PERFORM_TIMEOUT_MS,
        retry: RETRY,
      },
    });
  }
  kid = loose(kid).step('kdone', { output: PlainOutput, retry: RETRY });

  const steps: StepPlan[] = [];
  const count = random.int(2, 5);
  let hasChild = false;
  let hasWait = false;
  for (let i = 0; i < count; i++) {
    const name = `s${i}`;
    const when = chance(0.2) ? random.int(0, 3) : undefined;
    const base = when === undefined ? { name } : { name, when };
    const queued = queuePlan !== undefined && !queuePlan.wholeRun && chance(0.5);
    const roll = random.next();
    if (roll < 0.22) {
      steps.push({ kind: 'compute', ...base, queued, shuffled: chance(0.5), failFirst: chance(0.15) });
    } else if (roll < 0.6) {
      const earlierShuffled = steps
        .filter((s) => s.kind === 'compute' && s.shuffled && s.when === undefined)
        .map((s) => s.name);
      const keyFrom = earlierShuffled.length > 0 && chance(0.7) ? random.pick(earlierShuffled) : undefined;
      const external = chance(0.6);
      steps.push({
        kind: external ? 'external' : 'transactional',
        ...base,
        queued,
        mode: external
          ? (random.pick(['idempotent', 'reconcile', 'reconcile', 'unknown'] as const) ?? 'reconcile')
          : 'idempotent',
        compensate: chance(0.6),
        ...(keyFrom !== undefined ? { keyFrom } : {}),
        failFirst: chance(0.25),
        killAfterApply: external && chance(0.15),
        oversized: external && chance(0.08),
      });
    } else if (roll < 0.7) {
      steps.push({ kind: 'sleep', ...base, ms: random.int(20, 400) });
    } else if (roll < 0.8 && !hasWait) {
      hasWait = true;
      steps.push({ kind: 'wait', ...base, timeoutMs: random.int(300, 1_500) });
    } else if (!hasChild) {
      hasChild = true;
      steps.push(
        chance(0.5)
          ? { kind: 'child', ...base }
          : { kind: 'forEach', ...base, items: random.int(1, 3), concurrency: random.int(1, 2) },
      );
    } else {
      steps.push({ kind: 'compute', ...base, queued, shuffled: chance(0.5), failFirst: false });
    }
  }

  const deadlineMs = chance(0.12) ? random.int(800, 3_000) : undefined;
  const root = buildRoot(seed, steps, queuePlan, deadlineMs, kid, go);
  const runs: RunPlan[] = Array.from({ length: random.int(1, 3) }, (_, i) => ({
    tag: `f${seed}r${i}`,
    flags: random.int(0, 15),
    part: random.pick(['a', 'b']) ?? 'a',
    failKids: chance(0.2),
    eventAtMs: chance(0.75) ? random.int(0, 1_500) : undefined,
  }));
  return { seed, root, kid, steps, kidPlan, queue: queuePlan, deadlineMs, runs, eventName };
}

/** Whether a step with `when: bit` runs for these flags. */
export function stepRuns(plan: StepPlan, flags: number): boolean {
  return plan.when === undefined || (flags & (1 << plan.when)) !== 0;
}

/**
 * The DSL's builder is typed for hand-written chains; a generated chain goes through this one
 * loosely typed view of it (the runtime validates every definition the same way).
 */
interface LooseBuilder {
  step(name: string, config: object): AnyWorkflow;
  transactional(name: string, config: object): AnyWorkflow;
  external(name: string, config: object): AnyWorkflow;
  sleep(name: string, config: object): AnyWorkflow;
  waitFor(name: string, config: object): AnyWorkflow;
  child(name: string, child: AnyWorkflow, config: object): AnyWorkflow;
  forEach(name: string, config: object): AnyWorkflow;
}

function loose(w: AnyWorkflow): LooseBuilder {
  return w as unknown as LooseBuilder;
}

type Ctx = { readonly input: FuzzInput; readonly steps: Readonly<Record<string, unknown>> };
type ItemCtx = Ctx & { readonly item: number };

function buildRoot(
  seed: number,
  steps: readonly StepPlan[],
  queuePlan: QueuePlan | undefined,
  deadlineMs: number | undefined,
  kid: AnyWorkflow,
  go: ReturnType<typeof event>,
): AnyWorkflow {
  const partitionKey = queuePlan?.partitioned ? { partitionKey: ({ input }: { input: FuzzInput }) => input.part } : {};
  let w = workflow(rootName(seed), {
    version: 1,
    input: FuzzInput,
    ...(deadlineMs !== undefined ? { timeoutMs: deadlineMs } : {}),
    ...(queuePlan?.wholeRun ? { queue: { queue: queuePlan.definition, ...partitionKey } } : {}),
  }) as unknown as AnyWorkflow;
  for (const plan of steps) {
    const when = plan.when === undefined ? {} : { when: ({ input }: Ctx) => (input.flags & (1 << plan.when!)) !== 0 };
    const queued =
      'queued' in plan && plan.queued && queuePlan !== undefined
        ? { queue: { queue: queuePlan.definition, ...partitionKey } }
        : {};
    switch (plan.kind) {
      case 'compute':
        w = loose(w).step(plan.name, {
          output: plan.shuffled ? ShuffledOutput : PlainOutput,
          retry: RETRY,
          ...when,
          ...queued,
        });
        break;
      case 'transactional':
      case 'external': {
        const key = ({ input, steps: prior }: Ctx) =>
          effectKey(input.tag, plan.name, plan.keyFrom === undefined ? undefined : prior[plan.keyFrom]);
        const undoKey = ({ input }: Ctx) => `${input.tag}/${plan.name}/undo`;
        const compensate = plan.compensate
          ? {
              compensate: {
                name: `${plan.name}_undo`,
                key: undoKey,
                output: UndoOutput,
                retry: RETRY,
                ...(plan.kind === 'external'
                  ? { performTimeoutMs: FUZZ_PERFORM_TIMEOUT_MS, idempotentByKey: false }
                  : {}),
              },
            }
          : {};
        const external =
          plan.kind === 'external'
            ? { idempotentByKey: plan.mode === 'idempotent', performTimeoutMs: FUZZ_PERFORM_TIMEOUT_MS }
            : {};
        w = (plan.kind === 'external' ? loose(w).external : loose(w).transactional).call(w, plan.name, {
          output: EffectOutput,
          key,
          retry: RETRY,
          ...external,
          ...compensate,
          ...when,
          ...queued,
        });
        break;
      }
      case 'sleep':
        w = loose(w).sleep(plan.name, { for: () => plan.ms, ...when });
        break;
      case 'wait':
        w = loose(w).waitFor(plan.name, {
          event: go,
          match: ({ input }: Ctx) => input.tag,
          timeoutMs: plan.timeoutMs,
          retry: RETRY,
          ...when,
        });
        break;
      case 'child':
        w = loose(w).child(plan.name, kid, {
          key: ({ input }: Ctx) => `${input.tag}.${plan.name}`,
          input: ({ input }: Ctx) => ({ tag: `${input.tag}.${plan.name}`, fail: input.failKids }),
          retry: RETRY,
          ...when,
        });
        break;
      case 'forEach':
        w = loose(w).forEach(plan.name, {
          items: () => Array.from({ length: plan.items }, (_, i) => i),
          key: ({ input, item }: ItemCtx) => `${input.tag}.${plan.name}.${item}`,
          workflow: kid,
          input: ({ input, item }: ItemCtx) => ({
            tag: `${input.tag}.${plan.name}.${item}`,
            fail: input.failKids && item === 0,
          }),
          concurrency: plan.concurrency,
          retry: RETRY,
          ...when,
        });
        break;
    }
  }
  return w;
}

export type { SeededRandom };
