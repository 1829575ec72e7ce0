import { isDeepStrictEqual } from 'node:util';
import { sql, type Kysely } from 'kysely';
import type { LedgerflowDatabase } from '../../runtime/store/tables.js';
import { FINAL_RUN_STATUSES, RUN_STATUSES } from '../../runtime/store/tables.js';
import {
  computeOutput,
  effectKey,
  effectOutput,
  FUZZ_MAX_OUTPUT_BYTES,
  kidOutput,
  kidTags,
  stepRuns,
  type Composition,
  type RunPlan,
  type StepPlan,
} from './compose.js';
import type { FuzzDesk, HandlerSpan } from './fuzz-desk.js';
import type { BatchCounts, RunLog } from './fuzz-batch.js';

/**
 * The composition fuzzer's properties, checked after a batch settled (and, for queue rows,
 * sampled while it runs), from the database and from the desk's counters kept outside it:
 *
 * - effects: no key applied twice (desk, and transactional rows); every applied effect of a run
 *   that ended `compensated` undone exactly once; nothing undone for a run that did not compensate;
 * - limits: queue slots and rate (handler spans and queue rows), worker concurrency (spans);
 *   no compensating or final run holding a queue slot or a place in line;
 * - runs: statuses and row columns the state machine allows; every status explained by the
 *   model and the driver's actions (a cancel, a designed failure, a deadline); every completed
 *   run's step outputs equal to what the model says its handlers returned; no size limit
 *   exceeded; nothing left unfinished after the settle.
 */
export interface Violation {
  readonly seed: number;
  readonly check: string;
  readonly message: string;
}

export interface RunFacts {
  readonly id: string;
  readonly workflow: string;
  readonly tag: string;
  readonly input: unknown;
  readonly status: string;
  readonly compensation: string | null;
  readonly finishedAt: Date | null;
  readonly leaseOwner: string | null;
  readonly error: unknown;
  /** Where an unfinished run stands: its current step, when it is due, what it waits for. */
  readonly standing: unknown;
  readonly parentRunId: string | null;
  readonly output: Readonly<Record<string, unknown>> | null;
  readonly results: ReadonlyMap<
    string,
    { readonly output: unknown; readonly skipped: boolean; readonly bytes: number }
  >;
  readonly attempts: ReadonlyArray<{
    readonly step: string;
    readonly attempt: number;
    readonly status: string;
    readonly error: unknown;
  }>;
}

export async function readRunFacts(db: Kysely<LedgerflowDatabase>): Promise<RunFacts[]> {
  const { rows } = await sql<{
    id: string;
    workflow_name: string;
    tag: string;
    input: unknown;
    status: string;
    compensation: string | null;
    finished_at: Date | null;
    lease_owner: string | null;
    error: unknown;
    standing: unknown;
    parent_run_id: string | null;
    output: Record<string, unknown> | null;
    results: Array<{ step: string; output: unknown; skipped: boolean; bytes: number }> | null;
    attempts: Array<{ step: string; attempt: number; status: string; error: unknown }> | null;
  }>`
    SELECT r.id, r.workflow_name, r.input->>'tag' AS tag, r.input, r.status, r.compensation, r.finished_at, r.lease_owner, r.error,
           jsonb_build_object('step', r.current_step, 'fencing', r.fencing_token, 'updatedAgoMs', round(extract(epoch FROM statement_timestamp() - r.updated_at) * 1000), 'dueInMs', CASE WHEN isfinite(r.run_after) THEN round(extract(epoch FROM r.run_after - statement_timestamp()) * 1000) END,
                              'waits', (SELECT jsonb_agg(to_jsonb(w) - 'run_id') FROM ledgerflow.step_wait w WHERE w.run_id = r.id),
                              'queue', (SELECT jsonb_agg(jsonb_build_object('slot', false, 'queue', q.queue)) FROM ledgerflow.queue_waiter q WHERE q.run_id = r.id)) AS standing,
           r.parent_run_id, r.output,
           (SELECT jsonb_agg(jsonb_build_object('step', s.step_name, 'output', s.output, 'skipped', s.skipped,
                                                'bytes', octet_length(s.output::text)))
              FROM ledgerflow.step_result s WHERE s.run_id = r.id) AS results,
           (SELECT jsonb_agg(jsonb_build_object('step', a.step_name, 'attempt', a.attempt, 'status', a.status, 'error', a.error))
              FROM ledgerflow.step_attempt a WHERE a.run_id = r.id) AS attempts
      FROM ledgerflow.workflow_run r`.execute(db);
  return rows.map((r) => ({
    id: r.id,
    workflow: r.workflow_name,
    tag: r.tag,
    input: r.input,
    status: r.status,
    compensation: r.compensation,
    finishedAt: r.finished_at,
    leaseOwner: r.lease_owner,
    error: r.error,
    standing: r.standing,
    parentRunId: r.parent_run_id,
    output: r.output,
    results: new Map((r.results ?? []).map((s) => [s.step, { output: s.output, skipped: s.skipped, bytes: s.bytes }])),
    attempts: r.attempts ?? [],
  }));
}

/** While the batch runs: queue rows of runs that may not hold them, and slots over a limit. */
export async function sampleQueueRows(
  db: Kysely<LedgerflowDatabase>,
  compositions: readonly Composition[],
): Promise<Violation[]> {
  const violations: Violation[] = [];
  const { rows } = await sql<{
    kind: string;
    queue: string;
    partition: string;
    run_id: string;
    status: string;
    compensation: string | null;
  }>`
    SELECT 'slot' AS kind, s.queue, s.partition, s.run_id, r.status, r.compensation
      FROM ledgerflow.queue_slot s JOIN ledgerflow.workflow_run r ON r.id = s.run_id
    UNION ALL
    SELECT 'waiter', w.queue, w.partition, w.run_id, r.status, r.compensation
      FROM ledgerflow.queue_waiter w JOIN ledgerflow.workflow_run r ON r.id = w.run_id`.execute(db);
  const bySeed = new Map(compositions.filter((c) => c.queue !== undefined).map((c) => [c.queue!.definition.name, c]));
  const held = new Map<string, number>();
  for (const row of rows) {
    const composition = bySeed.get(row.queue);
    if (composition === undefined) continue;
    if (row.compensation !== null || (FINAL_RUN_STATUSES as readonly string[]).includes(row.status)) {
      violations.push({
        seed: composition.seed,
        check: 'queue: compensating/final run holds a queue row',
        message: `run ${row.run_id} (${row.status}, compensation ${row.compensation}) holds a ${row.kind} of queue ${row.queue}`,
      });
    }
    if (row.kind !== 'slot') continue;
    held.set(row.queue, (held.get(row.queue) ?? 0) + 1);
    held.set(`${row.queue}\u0000${row.partition}`, (held.get(`${row.queue}\u0000${row.partition}`) ?? 0) + 1);
  }
  for (const [queue, composition] of bySeed) {
    const limits = composition.queue!.definition.limits;
    const total = held.get(queue) ?? 0;
    if (limits.concurrency !== undefined && total > limits.concurrency) {
      violations.push({
        seed: composition.seed,
        check: 'queue: slots over concurrency',
        message: `${total} slots of ${queue} held (limit ${limits.concurrency})`,
      });
    }
    for (const [key, n] of held) {
      const [q, partition] = key.split('\u0000');
      if (q !== queue || partition === undefined || limits.partition?.concurrency === undefined) continue;
      if (n > limits.partition.concurrency) {
        violations.push({
          seed: composition.seed,
          check: 'queue: partition slots over concurrency',
          message: `${n} slots of ${queue}/${partition} held`,
        });
      }
    }
  }
  return violations;
}

export interface CheckInput {
  readonly db: Kysely<LedgerflowDatabase>;
  readonly desk: FuzzDesk;
  readonly compositions: readonly Composition[];
  readonly logs: ReadonlyMap<string, RunLog>;
  /** Final runs as they were just before a prune deleted them. */
  readonly snapshots: ReadonlyMap<string, RunFacts>;
  readonly concurrency: number;
  readonly counts: BatchCounts;
}

const FINAL = FINAL_RUN_STATUSES as readonly string[];

export async function checkBatch(input: CheckInput): Promise<Violation[]> {
  const { desk, compositions, counts } = input;
  const violations: Violation[] = [];
  const tick = (check: string): void => {
    counts.checks[check] = (counts.checks[check] ?? 0) + 1;
  };
  const current = await readRunFacts(input.db);
  const facts = new Map<string, RunFacts>([...input.snapshots, ...current.map((f) => [f.id, f] as const)]);
  const byTag = new Map([...facts.values()].map((f) => [f.tag, f]));
  const compositionOf = (tag: string): Composition | undefined =>
    compositions.find((c) => tag.startsWith(`f${c.seed}r`));
  const seedOf = (tag: string): number => compositionOf(tag)?.seed ?? -1;
  const violate = (tag: string, check: string, message: string): void => {
    violations.push({ seed: seedOf(tag), check, message: `${tag}: ${message}` });
  };

  // Effects, from the desk (external) and the app table (transactional).
  const { rows: txRows } = await sql<{ key: string; kind: string; n: number }>`
    SELECT key, kind, count(*)::int AS n FROM fuzz_app.applied GROUP BY key, kind`.execute(input.db);
  const applied = new Map(desk.applied);
  const undone = new Map(desk.undone);
  for (const row of txRows) {
    const into = row.kind === 'do' ? applied : undone;
    into.set(row.key, (into.get(row.key) ?? 0) + row.n);
  }
  for (const [key, n] of applied) {
    tick('effect applied at most once');
    if (n > 1) violate(tagOfKey(key), 'effect applied twice', `${key} applied ${n} times`);
  }
  for (const [key, n] of undone) {
    tick('effect undone at most once');
    if (n > 1) violate(tagOfKey(key), 'effect undone twice', `${key} undone ${n} times`);
    if (!applied.has(key)) violate(tagOfKey(key), 'undo of an effect never applied', `${key} undone but never applied`);
  }
  for (const [key, n] of applied) {
    const run = byTag.get(tagOfKey(key));
    if (run === undefined || !FINAL.includes(run.status) || !hasCompensation(key, compositionOf(run.tag))) continue;
    tick('compensated effects undone exactly once');
    const u = undone.get(key) ?? 0;
    if (run.status === 'compensated' && u !== n)
      violate(run.tag, 'compensated run left an effect not undone', `${key}: applied ${n}, undone ${u}`);
    if (run.status !== 'compensated' && run.status !== 'compensation_failed' && u > 0) {
      violate(
        run.tag,
        'effect undone for a run that did not compensate',
        `${key}: undone ${u} times, run ${run.status}`,
      );
    }
  }

  // Starts through the driver's worker (startAndWait): the run answered is one the database has,
  // of that start's tag, and a final status answered is the run's (unless an operator acted on it since).
  const { rows: prunedRows } = await sql<{ id: string; tag: string | null; status: string }>`
    SELECT id, tag, status FROM fuzz_app.pruned_run`.execute(input.db);
  const pruned = new Map(prunedRows.map((r) => [r.id, { tag: r.tag ?? '', status: r.status }]));
  for (const log of input.logs.values()) {
    const answer = log.local;
    if (answer?.runId === undefined) continue;
    tick('local start answered with its run');
    const run = facts.get(answer.runId) ?? pruned.get(answer.runId);
    if (!facts.has(answer.runId) && run !== undefined) tick('local start answered with its run (pruned unseen)');
    if (run === undefined || run.tag !== log.tag) {
      violate(
        log.tag,
        'local start answered a run that is not its own',
        `startAndWait answered run ${answer.runId} (${answer.status ?? 'still going at its timeout'}); the database ${run === undefined ? 'never had it, nor did a prune delete it' : `has it for ${run.tag}`}`,
      );
      continue;
    }
    if (
      answer.status !== undefined &&
      FINAL.includes(answer.status) &&
      log.retried === 0 &&
      !log.cancelled &&
      run.status !== answer.status
    )
      violate(
        log.tag,
        'local start answered a status the run does not have',
        `answered ${answer.status}, the run is ${run.status}`,
      );
  }

  // Runs: row consistency, explained statuses, outputs, sizes, nothing unfinished.
  for (const run of facts.values()) {
    const composition = compositionOf(run.tag);
    if (composition === undefined) continue;
    tick('run row consistent');
    if (!(RUN_STATUSES as readonly string[]).includes(run.status)) violate(run.tag, 'unknown status', run.status);
    if (FINAL.includes(run.status) !== (run.finishedAt !== null))
      violate(run.tag, 'finished_at iff final', `${run.status} with finished_at ${String(run.finishedAt)}`);
    if (run.status === 'cancelled' && run.compensation !== null) {
      violate(
        run.tag,
        'cancelled run with a compensation',
        `cancelled with compensation = '${run.compensation}' (a run already compensating is not cancelled)`,
      );
    }
    if ((run.status === 'compensated' || run.status === 'compensation_failed') && run.compensation === null) {
      violate(run.tag, 'compensated without compensation', run.status);
    }
    if ((run.status === 'running') !== (run.leaseOwner !== null))
      violate(run.tag, 'lease iff running', `${run.status}, lease ${run.leaseOwner}`);
    for (const [step, result] of run.results) {
      tick('output within max_output_bytes');
      if (result.bytes > FUZZ_MAX_OUTPUT_BYTES)
        violate(
          run.tag,
          'output over max_output_bytes',
          `step ${step} recorded ${result.bytes} bytes (limit ${FUZZ_MAX_OUTPUT_BYTES})`,
        );
    }
    for (const attempt of run.attempts) {
      const name = (attempt.error as { name?: string } | null)?.name;
      if (name === 'ConflictError') {
        violate(
          run.tag,
          'conflict on a request the model never changes',
          `step ${attempt.step} attempt ${attempt.attempt}: ${JSON.stringify(attempt.error)}`,
        );
      }
    }
    tick('nothing unfinished after the settle');
    if (run.status === 'needs_reconciliation' && parkedOnOversizedAnswer(run, composition)) {
      // The provider applied an effect whose answer is over max_output_bytes: no path may record it
      // (worker, reconciler and resolve all refuse), so the run waits, visibly, for an operator to
      // raise the limit. That is the promised end, not a run waiting forever.
      tick('parked on an answer over max_output_bytes');
      continue;
    }
    if (!FINAL.includes(run.status)) {
      violate(
        run.tag,
        'unfinished after the settle',
        `${run.workflow} is ${run.status}${run.compensation ? ` (compensating: ${run.compensation})` : ''}; error ${JSON.stringify(run.error)}; ${JSON.stringify(run.standing)}`,
      );
      continue;
    }
    const isRoot = run.workflow === composition.root.name;
    const plan = composition.runs.find((r) => r.tag === run.tag);
    const rootLog = input.logs.get(rootTagOf(run.tag));
    const parent = run.parentRunId === null ? undefined : [...facts.values()].find((f) => f.id === run.parentRunId);
    tick('final status explained');
    const why = explain(run, composition, isRoot ? plan : undefined, rootLog, parent);
    if (why !== undefined) violate(run.tag, 'final status not explained', why);
    if (run.status === 'completed') {
      tick('completed output equals the model');
      const wrong =
        isRoot && plan !== undefined ? rootOutputProblem(run, composition, plan) : kidOutputProblem(run, composition);
      if (wrong !== undefined) violate(run.tag, 'completed output differs from the model', wrong);
    }
  }

  // Limits: rates from the database's own grants, and from the handler spans the desk saw.
  violations.push(...(await grantViolations(input.db, compositions, tick)));
  violations.push(...spanViolations(input, facts, tick));
  return violations;
}

function tagOfKey(key: string): string {
  return key.split('/')[0]!;
}

function rootTagOf(tag: string): string {
  return tag.split('.')[0]!;
}

function hasCompensation(key: string, composition: Composition | undefined): boolean {
  if (composition === undefined) return false;
  const step = key.split('/')[1];
  if (step === 'keffect') return composition.kidPlan.effect;
  return composition.steps.some(
    (s) => s.name === step && (s.kind === 'transactional' || s.kind === 'external') && s.compensate,
  );
}

function declaresCompensations(composition: Composition, isRoot: boolean): boolean {
  return isRoot
    ? composition.steps.some((s) => (s.kind === 'transactional' || s.kind === 'external') && s.compensate)
    : composition.kidPlan.effect;
}

/** Is this parked run stopped at an external step whose provider answers over max_output_bytes? */
function parkedOnOversizedAnswer(run: RunFacts, composition: Composition): boolean {
  if (run.workflow !== composition.root.name) return false;
  const step = (run.error as { step?: unknown } | null)?.step;
  return composition.steps.some((s) => s.name === step && s.kind === 'external' && s.oversized);
}

/** Why a final status is not what this run could reach, or undefined when it is explained. */
function explain(
  run: RunFacts,
  composition: Composition,
  plan: RunPlan | undefined,
  log: RunLog | undefined,
  parent: RunFacts | undefined,
): string | undefined {
  const isRoot = run.workflow === composition.root.name;
  const compensates = declaresCompensations(composition, isRoot);
  const crashed = run.attempts.some((a) => /crash|lease/i.test(JSON.stringify(a.error ?? '')));
  let designedFailure: boolean;
  if (isRoot) {
    designedFailure =
      plan !== undefined &&
      composition.steps.some(
        (s) =>
          stepRuns(s, plan.flags) &&
          ((s.kind === 'compute' && s.failFirst) ||
            ((s.kind === 'external' || s.kind === 'transactional') && s.oversized) ||
            ((s.kind === 'child' || s.kind === 'forEach') && plan.failKids)),
      );
  } else {
    designedFailure = (run.input as { fail?: boolean }).fail === true;
  }
  const oversizedRan =
    isRoot &&
    plan !== undefined &&
    composition.steps.some(
      (s) => stepRuns(s, plan.flags) && (s.kind === 'external' || s.kind === 'transactional') && s.oversized,
    );
  const deadline = isRoot && composition.deadlineMs !== undefined;
  const cancelled = log?.cancelled === true || (log?.retried ?? 0) > 0;
  const parentStopped = parent !== undefined && parent.status !== 'completed';
  switch (run.status) {
    case 'completed':
      return undefined;
    case 'failed':
      if (compensates && !crashed)
        return `failed although its workflow declares compensations (it should have compensated); error ${JSON.stringify(run.error)}`;
      if (designedFailure || crashed || parentStopped) return undefined;
      return `failed with no designed failure: error ${JSON.stringify(run.error)}`;
    case 'cancelled':
      if (cancelled || deadline || parentStopped || !isRoot) return undefined;
      return 'cancelled, but nobody cancelled it and it has no deadline';
    case 'compensated':
      if (!compensates) return 'compensated, but its workflow declares no compensation';
      if (designedFailure || cancelled || deadline || crashed || parentStopped) return undefined;
      return `compensated with no designed failure and no cancel: error ${JSON.stringify(run.error)}`;
    case 'compensation_failed':
      // An applied effect whose answer exceeds max_output_bytes cannot be recorded, so nothing can
      // undo it: parking the run for an operator is the truthful end. No other compensation fails.
      if (oversizedRan) return undefined;
      return `compensation_failed: no compensation of the model fails; error ${JSON.stringify(run.error)}`;
    default:
      return undefined;
  }
}

function rootOutputProblem(run: RunFacts, composition: Composition, plan: RunPlan): string | undefined {
  const model = new Map<string, unknown>();
  for (const step of composition.steps) {
    const result = run.results.get(step.name);
    const ran = stepRuns(step, plan.flags);
    if (!ran) {
      if (result !== undefined && !result.skipped)
        return `step ${step.name} should have been skipped (flags ${plan.flags})`;
      continue;
    }
    if (result === undefined || result.skipped) return `step ${step.name} has no output`;
    const expected = expectedOutput(step, plan.tag, model);
    if (step.kind === 'sleep') {
      if (typeof (result.output as { until?: unknown }).until !== 'string')
        return `sleep ${step.name}: ${JSON.stringify(result.output)}`;
    } else if (step.kind === 'wait') {
      const out = result.output as { status: string; payload?: unknown };
      if (out.status === 'received' && !isDeepStrictEqual(out.payload, { note: plan.tag }))
        return `wait ${step.name} received ${JSON.stringify(out.payload)}`;
    } else if (
      !isDeepStrictEqual(result.output, expected) &&
      !isDeepStrictEqual(result.output, expectedOutput(step, plan.tag, model, storedOrder))
    ) {
      return `step ${step.name} (${step.kind}) output ${JSON.stringify(result.output)}, the model says ${JSON.stringify(expected)}`;
    }
    model.set(step.name, expected);
    const inRun = run.output?.[step.name];
    if (!isDeepStrictEqual(inRun, result.output))
      return `run output's ${step.name} ${JSON.stringify(inRun)} differs from its step result ${JSON.stringify(result.output)}`;
  }
  return undefined;
}

/**
 * An object with its keys in the order jsonb stores them (shorter first, then bytewise): what a
 * key function sees of an earlier output once outputs are read back from the database.
 */
function storedOrder(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const keys = Object.keys(value).sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(keys.map((k) => [k, storedOrder((value as Record<string, unknown>)[k])]));
}

/**
 * What a step's handler returned, given the earlier steps' modelled outputs as its key function
 * saw them: in the order their handlers returned them, or (`seen` = storedOrder) as jsonb stores
 * them. Either is a correct output; a run whose key saw both (a reload between two of its
 * attempts) is a ConflictError, checked on its own.
 */
function expectedOutput(
  step: StepPlan,
  tag: string,
  earlier: ReadonlyMap<string, unknown>,
  seen: (v: unknown) => unknown = (v) => v,
): unknown {
  switch (step.kind) {
    case 'compute':
      return computeOutput(tag, step);
    case 'transactional':
    case 'external':
      return effectOutput(
        effectKey(tag, step.name, step.keyFrom === undefined ? undefined : seen(earlier.get(step.keyFrom))),
        step.oversized,
      );
    case 'child':
      return kidOutput(kidTags(tag, step)[0]!);
    case 'forEach':
      return kidTags(tag, step).map(kidOutput);
    default:
      return undefined;
  }
}

function kidOutputProblem(run: RunFacts, composition: Composition): string | undefined {
  const kdone = run.results.get('kdone')?.output;
  if (!isDeepStrictEqual(kdone, kidOutput(run.tag)))
    return `kdone output ${JSON.stringify(kdone)}, the model says ${JSON.stringify(kidOutput(run.tag))}`;
  if (composition.kidPlan.effect) {
    const expected = effectOutput(`${run.tag}/keffect`, false);
    if (!isDeepStrictEqual(run.results.get('keffect')?.output, expected))
      return `keffect output ${JSON.stringify(run.results.get('keffect')?.output)}`;
  }
  return undefined;
}

/**
 * Rate limits on the database clock: no `limit + 1` grants of a queue (or of one partition) within
 * one period, read from every grant the window counted (fuzz_app.grant_log, filled by a trigger on
 * ledgerflow.queue_grant).
 */
export async function grantViolations(
  db: Kysely<LedgerflowDatabase>,
  compositions: readonly Composition[],
  tick: (check: string) => void,
): Promise<Violation[]> {
  const violations: Violation[] = [];
  const { rows } = await sql<{ queue: string; partition: string; at_ms: number }>`
    SELECT queue, partition, extract(epoch FROM granted_at) * 1000 AS at_ms FROM fuzz_app.grant_log ORDER BY queue, partition, granted_at`.execute(
    db,
  );
  const byQueue = groupBy(rows, (r) => `${r.queue}\u0000${r.partition}`);
  for (const composition of compositions) {
    const q = composition.queue;
    if (q === undefined) continue;
    const { rateLimit, partition } = q.definition.limits;
    for (const [key, grants] of byQueue) {
      const [name, part] = key.split('\u0000');
      if (name !== q.definition.name) continue;
      const limit = part === '' ? rateLimit : partition?.rateLimit;
      if (limit === undefined) continue;
      tick('queue rate on the database clock');
      for (let i = 0; i + limit.limit < grants.length; i++) {
        const spread = Number(grants[i + limit.limit]!.at_ms) - Number(grants[i]!.at_ms);
        if (spread < limit.periodMs) {
          violations.push({
            seed: composition.seed,
            check: 'queue rate exceeded on the database clock',
            message: `${limit.limit + 1} grants of ${name}${part === '' ? '' : `/${part}`} within ${spread.toFixed(1)} ms (limit ${limit.limit} per ${limit.periodMs} ms)`,
          });
          break;
        }
      }
    }
  }
  return violations;
}

/** Queue concurrency and rate, and worker concurrency, from the handler spans. */
function spanViolations(
  input: CheckInput,
  facts: ReadonlyMap<string, RunFacts>,
  tick: (check: string) => void,
): Violation[] {
  const violations: Violation[] = [];
  const spans = input.desk.spans.filter((s) => s.worker !== 'client');
  const attemptStatus = (s: HandlerSpan): string | undefined =>
    facts.get(s.runId)?.attempts.find((a) => a.step === s.step && a.attempt === s.attempt)?.status;
  // A handler whose attempt was abandoned (its lease expired under it) may overlap its successor by design.
  const live = spans.filter((s) => attemptStatus(s) !== 'abandoned');

  const byWorker = groupBy(live, (s) => s.worker);
  for (const [worker, list] of byWorker) {
    tick('worker concurrency');
    const peak = maxOverlap(list, (s) => s.id);
    if (peak.count > input.concurrency) {
      violations.push({
        seed: seedOfRun(input, facts, peak.at[0]!),
        check: 'worker ran more handlers than its concurrency',
        message: `worker ${worker} ran ${peak.count} handlers at once (concurrency ${input.concurrency}): ${peak.at.map(describeSpan).join('; ')}`,
      });
    }
  }

  for (const composition of input.compositions) {
    const q = composition.queue;
    if (q === undefined) continue;
    const queuedSteps = new Set(
      composition.steps.filter((s) => 'queued' in s && (s.queued || q.wholeRun)).map((s) => s.name),
    );
    if (q.wholeRun) for (const s of composition.steps) queuedSteps.add(s.name);
    const mine = live.filter((s) => s.workflow === composition.root.name && queuedSteps.has(s.step));
    const partOf = (s: HandlerSpan): string =>
      q.partitioned ? (composition.runs.find((r) => r.tag === facts.get(s.runId)?.tag)?.part ?? '?') : '';
    const limits = q.definition.limits;
    if (limits.concurrency !== undefined) {
      tick('queue concurrency');
      const peak = maxOverlap(mine, (s) => s.runId);
      if (peak.count > limits.concurrency) {
        violations.push({
          seed: composition.seed,
          check: 'queue concurrency exceeded',
          message: `${peak.count} runs in handlers of ${q.definition.name} at once (limit ${limits.concurrency}): ${peak.at.map(describeSpan).join('; ')}`,
        });
      }
    }
    if (limits.partition?.concurrency !== undefined) {
      for (const [part, list] of groupBy(mine, partOf)) {
        tick('partition concurrency');
        const peak = maxOverlap(list, (s) => s.runId);
        if (peak.count > limits.partition.concurrency) {
          violations.push({
            seed: composition.seed,
            check: 'partition concurrency exceeded',
            message: `${peak.count} runs of partition ${part} at once: ${peak.at.map(describeSpan).join('; ')}`,
          });
        }
      }
    }
    if (limits.rateLimit !== undefined && !q.wholeRun) {
      tick('queue rate');
      // Each handler start follows a grant of its own; HTTP latency moves a start by far less than half a period.
      const starts = [...mine].sort((a, b) => a.startedAt - b.startedAt);
      const { limit, periodMs } = limits.rateLimit;
      for (let i = 0; i + limit < starts.length; i++) {
        if (starts[i + limit]!.startedAt - starts[i]!.startedAt < periodMs / 2) {
          const close = starts.slice(i, i + limit + 1);
          violations.push({
            seed: composition.seed,
            check: 'queue rate exceeded',
            message:
              `${limit + 1} handlers of ${q.definition.name} started within ${Math.round(starts[i + limit]!.startedAt - starts[i]!.startedAt)} ms ` +
              `(limit ${limit} per ${periodMs} ms): ${close.map((s) => `${describeSpan(s)} at +${Math.round(s.startedAt - close[0]!.startedAt)} ms (${attemptStatus(s) ?? 'no attempt row'})`).join('; ')}`,
          });
          break;
        }
      }
    }
  }
  return violations;
}

function seedOfRun(input: CheckInput, facts: ReadonlyMap<string, RunFacts>, span: HandlerSpan): number {
  const tag = facts.get(span.runId)?.tag ?? '';
  return input.compositions.find((c) => tag.startsWith(`f${c.seed}r`))?.seed ?? -1;
}

function describeSpan(s: HandlerSpan): string {
  return `${s.workflow}/${s.step}#${s.attempt} run ${s.runId.slice(0, 8)} on ${s.worker}`;
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    groups.set(k, [...(groups.get(k) ?? []), item]);
  }
  return groups;
}

/** The most distinct `who` with a span open at one instant, and those spans. */
function maxOverlap(
  spans: readonly HandlerSpan[],
  who: (s: HandlerSpan) => string | number,
): { count: number; at: HandlerSpan[] } {
  let best: { count: number; at: HandlerSpan[] } = { count: 0, at: [] };
  for (const s of spans) {
    const open = spans.filter((o) => o.startedAt <= s.startedAt && (o.endedAt ?? Infinity) > s.startedAt);
    const distinct = new Set(open.map(who)).size;
    if (distinct > best.count) best = { count: distinct, at: open };
  }
  return best;
}
