import type { StepKind } from '../../dsl/step-kind.js';
import type { ReconcileReport } from '../reconciler/reconcile-report.js';
import type { PruneReport } from '../retention/prune.js';
import type { WaitingFor } from '../store/tables.js';
import type { FailureOutcome } from './failure-commits.js';
import type { CrashOutcome } from './crash-commits.js';
import type { FailurePhase, SerializedError } from './step-errors.js';

/**
 * What a worker reports through `onEvent`. Errors inside the worker's loops never crash the
 * process: they arrive here as `error` events and the loop retries with backoff.
 */
export type WorkerEvent =
  | { readonly type: 'worker-started'; readonly workerId: string; readonly workflows: readonly string[] }
  /**
   * Started with `allowMissingVersions` although these versions of its workflows have unfinished
   * runs it has no handlers for: some other worker must serve them, or they wait forever.
   */
  | { readonly type: 'versions-unserved'; readonly versions: readonly string[] }
  | { readonly type: 'worker-stopped'; readonly workerId: string; readonly released: number }
  | {
      readonly type: 'run-claimed';
      readonly runId: string;
      readonly workflow: string;
      readonly fencingToken: number;
      readonly step: string | null;
      readonly attempt: number | null;
      /** The claim closed an attempt whose worker stopped renewing its lease (a crash, as far as anyone can tell). */
      readonly tookOver: boolean;
    }
  | {
      readonly type: 'step-succeeded';
      readonly runId: string;
      readonly step: string;
      readonly kind: StepKind;
      readonly attempt: number;
      /** No handler ran: the ledger already held the effect. */
      readonly reused: boolean;
    }
  | {
      readonly type: 'step-failed';
      readonly runId: string;
      readonly step: string;
      readonly attempt: number;
      readonly error: SerializedError;
      /** Where the attempt failed: before its provider call, in it, after it answered, or elsewhere (`other`). */
      readonly phase: FailurePhase;
      /** `retry` (with the database time it is due), `failed`, or `parked`. */
      readonly outcome: FailureOutcome;
    }
  | {
      /**
       * The claim found that the step had crashed its worker again (its attempt's lease
       * expired, `LeaseExpired`, more than once): backed off (`retry`), or at the crash limit
       * (`max(maxAttempts, 5)`) `failed`, or `parked` with an open intent.
       */
      readonly type: 'step-crashed';
      readonly runId: string;
      readonly step: string;
      readonly crashes: number;
      readonly outcome: CrashOutcome;
    }
  /**
   * The database says this worker holds a run no flight of it drives: a claim whose commit
   * outcome was unknown (the connection broke after it committed) took it. Driven now.
   */
  | { readonly type: 'run-adopted'; readonly runId: string; readonly fencingToken: number }
  | { readonly type: 'run-completed'; readonly runId: string; readonly workflow: string }
  /** The run failed for good (or passed its deadline) and undoes its recorded effects: positioned at its first compensation. */
  | {
      readonly type: 'run-compensating';
      readonly runId: string;
      readonly step: string;
      readonly reason: 'failure' | 'cancel';
    }
  /** The run's last compensation committed: it is `compensated`. */
  | { readonly type: 'run-compensated'; readonly runId: string; readonly workflow: string }
  | { readonly type: 'run-released'; readonly runId: string; readonly step: string }
  | { readonly type: 'run-parked'; readonly runId: string; readonly step: string; readonly reason: string }
  /** A condition (`when`) said no: the step is recorded as skipped. */
  | { readonly type: 'step-skipped'; readonly runId: string; readonly step: string }
  /** A sleep, waitFor, child or forEach step parked the run `waiting` (no lease). */
  | { readonly type: 'run-waiting'; readonly runId: string; readonly step: string; readonly waitingFor: WaitingFor }
  /** The run was still unfinished at its deadline (`timeoutMs`): cancelled, with its children. */
  | { readonly type: 'run-deadline-exceeded'; readonly runId: string; readonly step: string | null }
  | {
      readonly type: 'run-rescheduled';
      readonly runId: string;
      readonly step: string;
      readonly until: Date;
      readonly reason: string;
    }
  | { readonly type: 'lease-lost'; readonly runId: string; readonly fencingToken: number; readonly step: string | null }
  | {
      readonly type: 'commit-outcome-unknown';
      readonly runId: string;
      readonly step: string;
      readonly error: SerializedError;
    }
  | { readonly type: 'reconcile-pass'; readonly report: ReconcileReport }
  /** A retention pass (`WorkerOptions.retention`) pruned finished runs. */
  | { readonly type: 'prune-pass'; readonly report: PruneReport }
  /**
   * The LISTEN subscription broke (backend terminated, server restarted): until
   * `listener-restored`, new runs are found by the poll only. Re-subscribing backs off.
   */
  | { readonly type: 'listener-lost'; readonly error: SerializedError }
  /** Subscribed again (after `failedAttempts` failures); the worker claims at once. */
  | { readonly type: 'listener-restored'; readonly failedAttempts: number }
  /**
   * A schedule's due ticks each started a run (`runIds`, in tick order; a tick whose run existed
   * already names that one), and/or its catch-up policy passed over missed ticks (`skipped`).
   */
  | {
      readonly type: 'schedule-ticked';
      readonly schedule: string;
      readonly ticks: readonly string[];
      readonly runIds: readonly string[];
      readonly skipped: boolean;
      readonly nextTickAt: Date;
    }
  /** A tick could not start its run (its input threw or is invalid): nothing started; tried again at `retryAt`. */
  | {
      readonly type: 'schedule-failed';
      readonly schedule: string;
      readonly tick: string;
      readonly error: SerializedError;
      readonly retryAt: Date;
    }
  | {
      readonly type: 'error';
      readonly where:
        | 'start'
        | 'claim'
        | 'heartbeat'
        | 'run'
        | 'reconcile'
        | 'schedule'
        | 'listen'
        | 'stop'
        | 'drain'
        | 'prune';
      readonly runId?: string;
      readonly error: SerializedError;
    };
