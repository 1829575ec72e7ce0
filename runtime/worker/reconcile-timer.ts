/**
 * The worker's own reconcile passes: every `reconcileIntervalMs` (0 turns them off) it runs
 * `runReconcilePass` over its registered workflows, as reconciler `<workerId>:reconciler`.
 *
 * Timer (a PeriodicPass): stopped ──start()──▶ ticking ──stop()──▶ stopped. A tick while a pass
 * is still running is skipped (one pass at a time). A pass that settled anything emits `reconcile-pass`; a pass
 * that throws emits `error` (where 'reconcile') and the next tick tries again. stop() only
 * cancels the ticks: `idle()` waits for the pass in progress, if any.
 */

import type { WorkflowRegistration } from '../contracts/registration.js';
import { runReconcilePass } from '../reconciler/reconciler.js';
import type { Store } from '../store/store.js';
import type { Telemetry } from '../telemetry/telemetry.js';
import { PeriodicPass } from './periodic-pass.js';
import { serializeError } from './step-errors.js';
import type { WorkerEvent } from './worker-events.js';

export interface ReconcileTimerContext {
  readonly store: Store;
  readonly workflows: readonly WorkflowRegistration[];
  readonly leaseMs: number;
  readonly intervalMs: number;
  readonly workerId: string;
  /** The worker's telemetry (loaded when it starts, so read at each pass). */
  telemetry(): Telemetry;
  emit(event: WorkerEvent): void;
}

export class ReconcileTimer {
  readonly #passes: PeriodicPass;

  constructor(ctx: ReconcileTimerContext) {
    const { store, workflows, leaseMs, workerId, emit } = ctx;
    this.#passes = new PeriodicPass(ctx.intervalMs, () =>
      runReconcilePass({ store, workflows, leaseMs, reconcilerId: `${workerId}:reconciler` }, ctx.telemetry())
        .then((report) => {
          if (report.recorded + report.released + report.parked > 0) emit({ type: 'reconcile-pass', report });
        })
        .catch((error: unknown) => emit({ type: 'error', where: 'reconcile', error: serializeError(error) })),
    );
  }

  start(): void {
    this.#passes.start();
  }

  stop(): void {
    this.#passes.stop();
  }

  /** Resolves once no pass is running. */
  async idle(): Promise<void> {
    await this.#passes.idle();
  }
}
