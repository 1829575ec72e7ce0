/**
 * What the worker's timers share (reconcile-timer.ts, schedule-timer.ts, retention-timer.ts): a
 * pass every `intervalMs`, one at a time.
 *
 * States: stopped ──start()──▶ ticking ──stop()──▶ stopped. start() with `intervalMs` ≤ 0 stays
 * stopped. A tick while a pass is still running is skipped. stop() cancels the ticks and aborts
 * the signal of the pass in progress (a pass that can stop early checks it); `idle()` waits for
 * that pass to end. The pass reports its own outcome: it must not reject.
 */
export class PeriodicPass {
  readonly #intervalMs: number;
  readonly #pass: (signal: AbortSignal) => Promise<void>;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #abort: AbortController | undefined;

  constructor(intervalMs: number, pass: (signal: AbortSignal) => Promise<void>) {
    this.#intervalMs = intervalMs;
    this.#pass = pass;
  }

  /** Starts ticking; with `now`, the first pass runs at once rather than after one interval. */
  start(options: { readonly now?: boolean } = {}): void {
    if (this.#intervalMs <= 0 || this.#timer !== undefined) return;
    this.#timer = setInterval(() => this.#tick(), this.#intervalMs);
    if (options.now === true) this.#tick();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#abort?.abort();
  }

  /** Resolves once no pass is running. */
  async idle(): Promise<void> {
    await this.#running;
  }

  #tick(): void {
    if (this.#running !== undefined || this.#timer === undefined) return;
    const abort = new AbortController();
    this.#abort = abort;
    this.#running = this.#pass(abort.signal).finally(() => {
      this.#running = undefined;
      this.#abort = undefined;
    });
  }
}
