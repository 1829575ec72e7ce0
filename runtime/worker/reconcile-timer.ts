/**
 * The worker's own reconcile passes: every `reconcileIntervalMs` (0 turns them off) it runs
 * `runReconcilePass` over its registered workflows, as reconciler `<workerId>:reconciler`.
 *
 * Timer: stopped ──start()──▶ ticking ──stop()──▶ stopped. A tick while a pass is still running
 * is skipped (one pass at a time). A pass that settled anything emits `reconcile-pass`; a pass
 * that throws emits `error` (where 'reconcile') and the next tick tries again. stop() only
 * cancels the ticks: `idle()` waits for the pass in progress, if any.
 */

import type { WorkflowRegistration } from '../contracts/registration.js';
import { runReconcilePass } from '../reconciler/reconciler.js';
import type { Store } from '../store/store.js';
import type { Telemetry } from '../telemetry/telemetry.js';
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
  readonly #ctx: ReconcileTimerContext;
  #timer: NodeJS.Timeout | undefined;
  #pass: Promise<void> | undefined;

  constructor(ctx: ReconcileTimerContext) {
    this.#ctx = ctx;
  }

  start(): void {
    if (this.#ctx.intervalMs > 0) this.#timer ??= setInterval(() => this.#tick(), this.#ctx.intervalMs);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Resolves once no pass is running. */
  async idle(): Promise<void> {
    await this.#pass;
  }

  #tick(): void {
    if (this.#pass !== undefined || this.#timer === undefined) return;
    const { store, workflows, leaseMs, workerId, emit } = this.#ctx;
    this.#pass = runReconcilePass({ store, workflows, leaseMs, reconcilerId: `${workerId}:reconciler` }, this.#ctx.telemetry())
      .then((report) => {
        if (report.recorded + report.released + report.parked > 0) emit({ type: 'reconcile-pass', report });
      })
      .catch((error: unknown) => emit({ type: 'error', where: 'reconcile', error: serializeError(error) }))
      .finally(() => {
        this.#pass = undefined;
      });
  }
}
