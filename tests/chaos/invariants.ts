import pg from 'pg';
import type { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import type { FakePaymentProvider } from '../../examples/fakes/payment-provider.js';

/**
 * What must hold after any amount of chaos, checked from the providers' own counters and the
 * database — never from the runtime's view of itself. Each check returns its violations as
 * sentences a reader can act on; an empty list means the property holds.
 */
export interface InvariantReport {
  readonly runs: number;
  readonly completed: number;
  /** Keys or references applied more than once at a provider, plus transactional rows beyond one per run. */
  readonly duplicates: number;
  /** Emails the provider applied after their sender had given up (client timeout, abort, or a killed worker). */
  readonly lateApplied: number;
  /** `receipt` attempts whose perform failed with the handler's own client `TimeoutError` (from the attempts table). */
  readonly clientTimeouts: number;
  readonly violations: readonly string[];
}

export interface ChaosProviders {
  readonly payments: FakePaymentProvider;
  readonly email: FakeEmailProvider;
}

/** The line a chaos worker prints when a `startAndWait` of its own returned the run completed: `<prefix> <orderId> <runId>`. */
export const LOCAL_ACKED_LINE = 'chaos-local-acked';
/** The line a chaos worker prints when such a start threw (not acknowledged: nothing is owed): `<prefix> <orderId> <error>`. */
export const LOCAL_FAILED_LINE = 'chaos-local-failed';

const CHARGE_STEP = 'charge';
const RECEIPT_STEP = 'receipt';
/** `step_effect.resolution` of an effect the reconciler found and recorded (runtime/reconciler). */
const RECONCILER_RESOLUTION = 'found by the reconciler';
/** How long requests the email provider accepted may take to be applied once the runs are done. */
const PENDING_APPLICATIONS_TIMEOUT_MS = 15_000;

export async function checkInvariants(
  url: string,
  workflowName: string,
  providers: ChaosProviders,
): Promise<InvariantReport> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const violations: string[] = [];
  let duplicates = 0;
  // A message accepted before the workers stopped may still be applied: count it before judging.
  await providers.email.whenIdle(PENDING_APPLICATIONS_TIMEOUT_MS).catch((error: unknown) => {
    violations.push(`email provider did not finish its pending applications: ${(error as Error).message}`);
  });
  const counters = { payments: providers.payments.stats(), email: providers.email.stats() };
  try {
    const q = async <R extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<R[]> =>
      (await client.query<R>(sql, params)).rows;

    const statusRows = await q<{ status: string; n: number }>(
      `SELECT status, count(*)::int AS n FROM ledgerflow.workflow_run WHERE workflow_name = $1 GROUP BY status`,
      [workflowName],
    );
    const byStatus = Object.fromEntries(statusRows.map((r) => [r.status, r.n]));
    const runs = statusRows.reduce((sum, r) => sum + r.n, 0);
    const completed = byStatus['completed'] ?? 0;
    if (completed !== runs) violations.push(`not every run completed: ${JSON.stringify(byStatus)}`);
    const unfinished = await q<{ id: string; status: string; error: unknown }>(
      `SELECT id, status, error FROM ledgerflow.workflow_run WHERE workflow_name = $1 AND status <> 'completed' LIMIT 5`,
      [workflowName],
    );
    for (const run of unfinished) violations.push(`run ${run.id} ended ${run.status}: ${JSON.stringify(run.error)}`);

    // Provider side: one application per key, and per business reference.
    for (const [key, count] of Object.entries(counters.payments.chargesByKey)) {
      if (count > 1) {
        duplicates += count - 1;
        violations.push(`payment key ${key} charged ${count} times`);
      }
    }
    for (const [reference, count] of Object.entries(counters.payments.chargesByReference)) {
      if (count > 1) {
        duplicates += count - 1;
        violations.push(`order ${reference} charged ${count} times (under different keys)`);
      }
    }
    for (const [reference, count] of Object.entries(counters.email.sentByReference)) {
      if (count > 1) {
        duplicates += count - 1;
        violations.push(`email ${reference} sent ${count} times`);
      }
    }

    // The application table: exactly one transactional write per run.
    const reservations = await q<{ id: string; n: number }>(
      `SELECT r.id, count(a.id)::int AS n
         FROM ledgerflow.workflow_run r LEFT JOIN chaos_app.reservation a ON a.run_id = r.id
        WHERE r.workflow_name = $1
        GROUP BY r.id HAVING count(a.id) <> 1`,
      [workflowName],
    );
    for (const row of reservations) {
      if (row.n > 1) duplicates += row.n - 1;
      violations.push(`run ${row.id} has ${row.n} reservation rows`);
    }

    // The ledger equals what the providers did.
    const ledger = await q<{
      step_name: string;
      idempotency_key: string;
      status: string;
      effect: Record<string, unknown>;
    }>(`SELECT step_name, idempotency_key, status, effect FROM ledgerflow.step_effect WHERE step_name IN ($1, $2)`, [
      CHARGE_STEP,
      RECEIPT_STEP,
    ]);
    compareLedger(
      'payment',
      ledger.filter((r) => r.step_name === CHARGE_STEP),
      Object.keys(counters.payments.chargesByKey),
      violations,
    );
    compareLedger(
      'email',
      ledger.filter((r) => r.step_name === RECEIPT_STEP),
      Object.keys(counters.email.sentByReference),
      violations,
    );

    // The outputs the runs checkpointed are the provider's own ids for those keys.
    const chargeIds = new Map(providers.payments.charges().map((c) => [c.idempotencyKey, c.id]));
    const messageIds = new Map(providers.email.messages().map((m) => [m.reference, m.messageId]));
    const outputs = await q<{
      run_id: string;
      step_name: string;
      idempotency_key: string;
      output: Record<string, unknown>;
    }>(`SELECT run_id, step_name, idempotency_key, output FROM ledgerflow.step_result WHERE step_name IN ($1, $2)`, [
      CHARGE_STEP,
      RECEIPT_STEP,
    ]);
    for (const row of outputs) {
      const [field, actual] =
        row.step_name === CHARGE_STEP
          ? ['chargeId', chargeIds.get(row.idempotency_key)]
          : ['messageId', messageIds.get(row.idempotency_key)];
      if (row.output[field] !== actual) {
        violations.push(
          `run ${row.run_id} step ${row.step_name} checkpointed ${field} ${String(row.output[field])}, provider has ${String(actual)}`,
        );
      }
    }

    // Nothing left half-done in the ledger (a compensation refused for good leaves its intent
    // released: checked by checkCompensationInvariants).
    const open = await q<{ workflow_id: string; step_name: string; status: string }>(
      `SELECT e.workflow_id, e.step_name, e.status FROM ledgerflow.step_effect e JOIN ledgerflow.workflow_run r ON r.id = e.workflow_id
        WHERE e.status <> 'recorded' AND NOT (e.status = 'released' AND r.status = 'compensation_failed')`,
    );
    for (const row of open)
      violations.push(`ledger row ${row.workflow_id}/${row.step_name} left in status ${row.status}`);

    // Every step of every completed run has its result, pointing at the attempt that succeeded.
    const missingResults = await q<{ id: string; missing: number }>(
      `SELECT r.id, (SELECT count(*)::int FROM ledgerflow.workflow_step_def d
                      WHERE d.workflow_name = r.workflow_name AND d.version = r.workflow_version
                        AND NOT EXISTS (SELECT 1 FROM ledgerflow.step_result s WHERE s.run_id = r.id AND s.step_name = d.step_name)) AS missing
         FROM ledgerflow.workflow_run r WHERE r.workflow_name = $1 AND r.status = 'completed'`,
      [workflowName],
    );
    for (const row of missingResults.filter((r) => r.missing > 0)) {
      violations.push(`completed run ${row.id} lacks ${row.missing} step result(s)`);
    }

    // Attempts: numbered 1..n without gaps and started in that order; at most one succeeded. A
    // step with a result has a successful attempt at or after the one the result names (a
    // reconciled effect is attributed to the attempt that performed it, as its ledger row is),
    // unless the reconciler recorded it, in which case the performing attempt was abandoned.
    const attempts = await q<{
      run_id: string;
      step_name: string;
      numbers: number[];
      ordered: boolean;
      succeeded: number;
      succeeded_attempt: number | null;
      result_attempt: number | null;
      ledger_attempt: number | null;
      ledger_resolution: string | null;
    }>(
      `SELECT a.run_id, a.step_name,
              array_agg(a.attempt ORDER BY a.attempt) AS numbers,
              array_agg(a.attempt ORDER BY a.started_at, a.attempt) = array_agg(a.attempt ORDER BY a.attempt) AS ordered,
              count(*) FILTER (WHERE a.status = 'succeeded')::int AS succeeded,
              max(a.attempt) FILTER (WHERE a.status = 'succeeded') AS succeeded_attempt,
              (SELECT s.attempt FROM ledgerflow.step_result s WHERE s.run_id = a.run_id AND s.step_name = a.step_name) AS result_attempt,
              (SELECT e.attempt FROM ledgerflow.step_effect e WHERE e.workflow_id = a.run_id AND e.step_name = a.step_name) AS ledger_attempt,
              (SELECT e.resolution FROM ledgerflow.step_effect e WHERE e.workflow_id = a.run_id AND e.step_name = a.step_name) AS ledger_resolution
         FROM ledgerflow.step_attempt a
        GROUP BY a.run_id, a.step_name`,
    );
    for (const row of attempts) {
      const where = `run ${row.run_id} step ${row.step_name}`;
      const expected = row.numbers.map((_, i) => i + 1);
      if (row.numbers.join(',') !== expected.join(','))
        violations.push(`${where}: attempt numbers ${row.numbers.join(',')} have gaps`);
      if (!row.ordered) violations.push(`${where}: attempts did not start in the order of their numbers`);
      if (row.succeeded > 1) violations.push(`${where}: ${row.succeeded} attempts succeeded`);
      if (row.result_attempt === null) continue;
      if (row.succeeded_attempt === null) {
        if (row.ledger_resolution !== RECONCILER_RESOLUTION) {
          violations.push(`${where}: has a result, but no attempt succeeded and the reconciler did not record it`);
        }
      } else if (row.result_attempt > row.succeeded_attempt) {
        violations.push(
          `${where}: result names attempt ${row.result_attempt}, after the successful attempt ${row.succeeded_attempt}`,
        );
      }
      if (row.ledger_attempt !== null && row.ledger_attempt !== row.result_attempt) {
        violations.push(
          `${where}: result names attempt ${row.result_attempt}, its ledger row attempt ${row.ledger_attempt}`,
        );
      }
    }

    // What the late-application scenario exercised: a client that gave up on a request the
    // provider applied anyway. Counted, so that a run which stopped exercising it is noticed.
    const [timeouts] = await q<{ n: number }>(
      `SELECT count(*)::int AS n FROM ledgerflow.step_attempt a JOIN ledgerflow.workflow_run r ON r.id = a.run_id
        WHERE r.workflow_name = $1 AND a.step_name = $2 AND a.error::text LIKE '%"TimeoutError"%'`,
      [workflowName, RECEIPT_STEP],
    );
    return {
      runs,
      completed,
      duplicates,
      lateApplied: counters.email.lateApplied,
      clientTimeouts: timeouts?.n ?? 0,
      violations,
    };
  } finally {
    await client.end();
  }
}

function compareLedger(
  provider: string,
  rows: ReadonlyArray<{ idempotency_key: string; status: string }>,
  providerKeys: readonly string[],
  violations: string[],
): void {
  const ledgerKeys = new Set(rows.filter((r) => r.status === 'recorded').map((r) => r.idempotency_key));
  const applied = new Set(providerKeys);
  const notInLedger = [...applied].filter((k) => !ledgerKeys.has(k));
  const notAtProvider = [...ledgerKeys].filter((k) => !applied.has(k));
  if (notInLedger.length > 0)
    violations.push(`${provider} applied ${notInLedger.length} key(s) missing from the ledger, e.g. ${notInLedger[0]}`);
  if (notAtProvider.length > 0)
    violations.push(
      `ledger records ${notAtProvider.length} ${provider} key(s) the provider never applied, e.g. ${notAtProvider[0]}`,
    );
}

/** What the waiting, branching and fanned-out runs must show after the chaos. */
export interface FulfilReport {
  readonly runs: number;
  readonly completed: number;
  readonly children: number;
  /** Events stored (one per order: resends with the same dedupe key store nothing), pruned ones included. */
  readonly events: number;
  /** Of those, the ones pruned during the chaos (tombstones in event_archive). */
  readonly pruned: number;
  /** Events taken by a waiting step. */
  readonly consumed: number;
  /** `expressLabel` steps skipped by their condition. */
  readonly skipped: number;
  /** Application rows beyond one per pick child / express order. */
  readonly duplicates: number;
  readonly violations: readonly string[];
}

/**
 * Checks `chaos-fulfil` and its `chaos-pick` children: every run completed; each parent has
 * exactly one child per line (index 0..n-1), each child wrote exactly one pick row; express
 * orders wrote one label row and standard orders none (their step skipped); every order's event
 * was stored once and taken once, by that order's run, which received it (no timeout); every
 * sleep's recorded wake-up time is the one its output reports, and the run moved on after it.
 */
export async function checkFulfilInvariants(
  url: string,
  expected: ReadonlyArray<{ readonly orderId: string; readonly lines: number; readonly express: boolean }>,
): Promise<FulfilReport> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const violations: string[] = [];
  let duplicates = 0;
  try {
    const q = async <R extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<R[]> =>
      (await client.query<R>(text, params)).rows;
    const parents = await q<{
      id: string;
      order_id: string;
      status: string;
      output: Record<string, { carrier?: string; status?: string }> | null;
      error: unknown;
    }>(
      `SELECT id, input->>'orderId' AS order_id, status, output, error FROM ledgerflow.workflow_run WHERE workflow_name = 'chaos-fulfil'`,
    );
    const byOrder = new Map(parents.map((p) => [p.order_id, p]));
    for (const order of expected) {
      const run = byOrder.get(order.orderId);
      if (run === undefined) {
        violations.push(`order ${order.orderId}: no chaos-fulfil run`);
        continue;
      }
      if (run.status !== 'completed')
        violations.push(`fulfil run ${run.id} ended ${run.status}: ${JSON.stringify(run.error)}`);
      else if (run.output?.['shipped']?.status !== 'received')
        violations.push(`fulfil run ${run.id} did not receive its event: ${JSON.stringify(run.output?.['shipped'])}`);
    }
    const children = await q<{
      parent_run_id: string;
      order_id: string;
      n: number;
      indexes: number[];
      completed: number;
    }>(
      `SELECT c.parent_run_id, p.input->>'orderId' AS order_id, count(*)::int AS n,
              array_agg(c.parent_index ORDER BY c.parent_index) AS indexes,
              count(*) FILTER (WHERE c.status = 'completed')::int AS completed
         FROM ledgerflow.workflow_run c JOIN ledgerflow.workflow_run p ON p.id = c.parent_run_id
        WHERE c.workflow_name = 'chaos-pick' GROUP BY c.parent_run_id, p.input->>'orderId'`,
    );
    const childrenByOrder = new Map(children.map((c) => [c.order_id, c]));
    let childCount = 0;
    for (const order of expected) {
      const got = childrenByOrder.get(order.orderId);
      childCount += got?.n ?? 0;
      const indexes = Array.from({ length: order.lines }, (_, i) => i);
      if (got === undefined || got.indexes.join(',') !== indexes.join(',')) {
        violations.push(
          `order ${order.orderId}: children at indexes ${got?.indexes.join(',') ?? '(none)'}, expected 0..${order.lines - 1}`,
        );
        if (got !== undefined && got.n > order.lines) duplicates += got.n - order.lines;
      }
      if (got !== undefined && got.completed !== got.n)
        violations.push(`order ${order.orderId}: ${got.n - got.completed} pick children not completed`);
    }
    const picks = await q<{ order_id: string; line: number; n: number }>(
      `SELECT order_id, line, count(*)::int AS n FROM chaos_app.pick GROUP BY order_id, line HAVING count(*) <> 1`,
    );
    for (const row of picks) {
      duplicates += row.n - 1;
      violations.push(`pick ${row.order_id}/${row.line} written ${row.n} times`);
    }
    const [pickTotal] = await q<{ n: number }>(`SELECT count(*)::int AS n FROM chaos_app.pick`);
    const expectedPicks = expected.reduce((sum, o) => sum + o.lines, 0);
    if (pickTotal?.n !== expectedPicks) violations.push(`${pickTotal?.n ?? 0} pick rows, expected ${expectedPicks}`);
    const labels = await q<{ order_id: string; n: number }>(
      `SELECT order_id, count(*)::int AS n FROM chaos_app.label GROUP BY order_id`,
    );
    const labelsByOrder = new Map(labels.map((l) => [l.order_id, l.n]));
    for (const order of expected) {
      const n = labelsByOrder.get(order.orderId) ?? 0;
      if (n !== (order.express ? 1 : 0)) {
        if (n > 1) duplicates += n - 1;
        violations.push(`order ${order.orderId} (${order.express ? 'express' : 'standard'}) has ${n} label rows`);
      }
    }
    const [skipped] = await q<{ n: number }>(
      `SELECT count(*)::int AS n FROM ledgerflow.step_result WHERE workflow_name = 'chaos-fulfil' AND step_name = 'expressLabel' AND skipped`,
    );
    const standard = expected.filter((o) => !o.express).length;
    if (skipped?.n !== standard) violations.push(`${skipped?.n ?? 0} expressLabel steps skipped, expected ${standard}`);
    // Consumed events are pruned during the chaos (core 0016): each survives as a live row or as
    // its tombstone, never both, never neither, and a resend after the prune stored nothing.
    const events = await q<{ correlation_key: string; consumed_by_run: string | null; pruned: boolean }>(
      `SELECT correlation_key, consumed_by_run, false AS pruned FROM ledgerflow.event WHERE name = 'chaos.shipped'
       UNION ALL
       SELECT correlation_key, consumed_by_run, true FROM ledgerflow.event_archive WHERE name = 'chaos.shipped'`,
    );
    const eventsByOrder = new Map<string, number>();
    for (const e of events) eventsByOrder.set(e.correlation_key, (eventsByOrder.get(e.correlation_key) ?? 0) + 1);
    for (const order of expected) {
      const n = eventsByOrder.get(order.orderId) ?? 0;
      if (n !== 1)
        violations.push(`order ${order.orderId}: ${n} chaos.shipped events stored (resends must be deduped)`);
    }
    for (const e of events) {
      const owner = byOrder.get(e.correlation_key);
      if (e.consumed_by_run === null) violations.push(`event for ${e.correlation_key} was never taken (lost)`);
      else if (owner !== undefined && e.consumed_by_run !== owner.id)
        violations.push(`event for ${e.correlation_key} taken by run ${e.consumed_by_run}, not ${owner.id}`);
    }
    // Queues: nothing held or waiting once everything finished (every slot came back, kills included).
    const [queues] = await q<{ slots: number; waiters: number; in_flight: number; waiting: number }>(
      `SELECT (SELECT count(*)::int FROM ledgerflow.queue_slot) AS slots, (SELECT count(*)::int FROM ledgerflow.queue_waiter) AS waiters,
              (SELECT coalesce(sum(in_flight), 0)::int FROM ledgerflow.queue_partition) AS in_flight,
              (SELECT coalesce(sum(waiting), 0)::int FROM ledgerflow.queue_partition) AS waiting`,
    );
    if (queues !== undefined && (queues.slots | queues.waiters | queues.in_flight | queues.waiting) !== 0) {
      violations.push(`queue state left behind: ${JSON.stringify(queues)}`);
    }
    const sleeps = await q<{ run_id: string; until: Date; output_until: string | null; woke: Date | null }>(
      `SELECT w.run_id, w.until, s.output->>'until' AS output_until, s.created_at AS woke
         FROM ledgerflow.step_wait w
         LEFT JOIN ledgerflow.step_result s ON s.run_id = w.run_id AND s.step_name = w.step_name
        WHERE w.kind = 'sleep' AND w.step_name = 'cooldown'`,
    );
    for (const row of sleeps) {
      if (row.output_until !== row.until.toISOString())
        violations.push(`run ${row.run_id}: slept until ${row.output_until}, recorded ${row.until.toISOString()}`);
      if (row.woke !== null && row.woke.getTime() < row.until.getTime())
        violations.push(`run ${row.run_id} woke at ${row.woke.toISOString()}, before ${row.until.toISOString()}`);
    }
    return {
      runs: parents.length,
      completed: parents.filter((p) => p.status === 'completed').length,
      children: childCount,
      events: events.length,
      pruned: events.filter((e) => e.pruned).length,
      consumed: events.filter((e) => e.consumed_by_run !== null).length,
      skipped: skipped?.n ?? 0,
      duplicates,
      violations,
    };
  } finally {
    await client.end();
  }
}
