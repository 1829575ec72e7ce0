import { signalKey } from '../client/send-event.js';
import type { Json, WaitingFor, WorkflowRunRow } from '../store/tables.js';
import { QUEUE_NO_PARTITION } from '../store/queue-partition.js';
import { formatJson, formatTime } from './format-values.js';

/*
 * What a waiting run waits for, in a line. Here, below the CLI and the dashboard, because
 * `ledgerflow runs` and `ledgerflow run` print it as the dashboard's run page does.
 */

export type WaitingRun = Pick<WorkflowRunRow, 'id' | 'waiting_for' | 'children_open' | 'children_failed'>;

/**
 * What a waiting run waits for, tersely and in the CLI's UTC times: `event payment.settled key
 * o-1 until 2026-03-01 12:00:00Z`, `signal approval`, `sleep until …`, `3 of 10 children open`;
 * `-` when the run is not waiting. (The worker's `describeWait` writes the same facts into the
 * attempt history as a sentence with ISO times.) Children are counted from the run's live
 * counters, not from the snapshot taken when it began to wait.
 *
 * @example
 * formatWaitingFor(run, { step: true }); // 'event payment.settled key o-1 until 2026-03-01 12:00:00Z (step settled)'
 */
export function formatWaitingFor(run: WaitingRun, options: { readonly step?: boolean } = {}): string {
  if (run.waiting_for === null) return '-';
  const wait = waitingForOf(run.waiting_for);
  if (wait === undefined) return formatJson(run.waiting_for);
  const step = options.step === true ? ` (step ${wait.step})` : '';
  switch (wait.kind) {
    case 'sleep':
      return `sleep until ${formatIsoTime(wait.until)}${step}`;
    case 'event': {
      const what = wait.key === signalKey(run.id) ? `signal ${wait.event}` : `event ${wait.event} key ${wait.key}`;
      return `${what}${wait.until === null ? '' : ` until ${formatIsoTime(wait.until)}`}${step}`;
    }
    case 'children': {
      const failed = run.children_failed > 0 ? `, ${run.children_failed} failed` : '';
      return `${run.children_open} of ${wait.total} children open${failed}${step}`;
    }
    case 'queue': {
      const partition = wait.partition === QUEUE_NO_PARTITION ? '' : ` partition ${wait.partition}`;
      const until = wait.until === null ? '' : ` (next token ${formatIsoTime(wait.until)})`;
      return `slot of queue ${wait.queue}${partition}${until}${wait.step === '' ? ' (whole run)' : step}`;
    }
  }
}

/** An ISO instant from a jsonb document, printed like the timestamp columns. */
function formatIsoTime(iso: string): string {
  const time = new Date(iso);
  return Number.isNaN(time.getTime()) ? iso : formatTime(time);
}

/** `workflow_run.waiting_for` as the worker wrote it (worker/wait-commits.ts), or `undefined` if it has another shape. */
function waitingForOf(value: Json): WaitingFor | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const { kind, step } = value;
  if (typeof step !== 'string') return undefined;
  if (kind === 'sleep' && typeof value['until'] === 'string') return { kind, step, until: value['until'] };
  if (kind === 'event') {
    const { event, key, until } = value;
    if (typeof event !== 'string' || typeof key !== 'string' || (until !== null && typeof until !== 'string'))
      return undefined;
    return { kind, step, event, key, until };
  }
  if (kind === 'children') {
    const { open, total, wakeBelow } = value;
    if (typeof open !== 'number' || typeof total !== 'number' || typeof wakeBelow !== 'number') return undefined;
    return { kind, step, open, total, wakeBelow };
  }
  if (kind === 'queue') {
    const { queue, partition, until } = value;
    if (typeof queue !== 'string' || typeof partition !== 'string' || (until !== null && typeof until !== 'string'))
      return undefined;
    return { kind, step, queue, partition, until };
  }
  return undefined;
}
