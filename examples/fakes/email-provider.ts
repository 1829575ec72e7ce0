import { countBy } from './payment-provider.js';

export interface EmailMessage {
  readonly to: string;
  readonly subject: string;
  readonly body: string;
  /**
   * A caller-chosen reference stored with the message (like a custom header or tag). The provider
   * does not dedupe on it; it only lets the sender look a message up later.
   */
  readonly reference: string;
}

export interface SentEmail extends EmailMessage {
  readonly messageId: string;
  readonly sequence: number;
}

export interface SendOptions {
  /**
   * The caller gives up when this aborts: `send` rejects with its reason. Giving up does not
   * take back a request the provider already received — it may still be applied.
   */
  readonly signal?: AbortSignal;
}

/** The provider's API as a workflow handler sees it; implemented in-process and over HTTP. */
export interface EmailGateway {
  send(message: EmailMessage, options?: SendOptions): Promise<SentEmail>;
  /** Messages stored under `reference`, oldest first (a provider-side search by tag). */
  findByReference(reference: string): Promise<readonly SentEmail[]>;
}

export interface EmailProviderStats {
  /** Messages applied (delivered); requests still pending are not counted. */
  readonly totalSent: number;
  readonly lookups: number;
  readonly sentByReference: Readonly<Record<string, number>>;
  /** Requests accepted and not yet applied. */
  readonly pending: number;
  /** Messages applied after their sender had given up waiting (timed out, aborted, or died). */
  readonly lateApplied: number;
}

export interface FakeEmailProviderOptions {
  /** Fixed time between accepting a request and applying it (the response follows the application). */
  readonly latencyMs?: number;
  /**
   * A further delay before applying, per request (a number, or a function asked once per
   * request, e.g. a seeded random): the provider accepts the request, applies it only after
   * this delay and answers only after applying. A caller that gives up sooner has sent a
   * message that WILL be delivered later, and a lookup in between does not find it.
   */
  readonly applyDelayMs?: number | ((message: EmailMessage) => number);
}

/**
 * An email/receipt API that, like most, does **not** dedupe: every `send` delivers another
 * message, even with a reference it has seen before. What it does offer is a lookup by the
 * reference stored with the message, which is what a ledgerflow `reconcile` uses to find out
 * whether a crashed attempt's email went out.
 *
 * @example
 * const email = new FakeEmailProvider();
 * await email.send({ to: 'a@example.com', subject: 'Receipt', body: '…', reference: 'receipt:order-1' });
 * (await email.findByReference('receipt:order-1')).length; // 1
 * email.sentForReference('receipt:order-1');               // 1
 *
 * With `applyDelayMs` it applies late, as real providers do behind a queue: a request is
 * accepted at once and applied (and only then answered) after the delay, whether or not its
 * sender is still waiting; `findByReference` sees a message only once it is applied.
 * `whenIdle()` waits until every accepted request has been applied.
 */
export class FakeEmailProvider implements EmailGateway {
  readonly #sent: SentEmail[] = [];
  readonly #latencyMs: number;
  readonly #applyDelayMs: (message: EmailMessage) => number;
  readonly #idleWaiters: Array<() => void> = [];
  #lookups = 0;
  #pending = 0;
  #lateApplied = 0;

  constructor(options: FakeEmailProviderOptions = {}) {
    this.#latencyMs = options.latencyMs ?? 0;
    const applyDelay = options.applyDelayMs ?? 0;
    this.#applyDelayMs = typeof applyDelay === 'function' ? applyDelay : () => applyDelay;
  }

  /**
   * Accepts the message; it is applied after the latency and the apply delay, and the promise
   * settles then. If `options.signal` aborts first, the promise rejects with its reason at once —
   * and the message is still applied when its time comes (counted in `lateApplied`).
   */
  async send(message: EmailMessage, options: SendOptions = {}): Promise<SentEmail> {
    validateEmailMessage(message);
    const { signal } = options;
    signal?.throwIfAborted(); // never sent
    const applied = this.#accept(message, signal);
    if (signal === undefined) return applied;
    return new Promise<SentEmail>((resolve, reject) => {
      const giveUp = (): void => reject(signal.reason);
      signal.addEventListener('abort', giveUp, { once: true });
      applied.then(
        (sent) => {
          signal.removeEventListener('abort', giveUp);
          resolve(sent);
        },
        (error: unknown) => {
          signal.removeEventListener('abort', giveUp);
          reject(error);
        },
      );
    });
  }

  async #accept(message: EmailMessage, signal: AbortSignal | undefined): Promise<SentEmail> {
    const delayMs = this.#latencyMs + Math.max(0, this.#applyDelayMs(message));
    this.#pending += 1;
    try {
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      const sent: SentEmail = {
        to: message.to,
        subject: message.subject,
        body: message.body,
        reference: message.reference,
        messageId: `msg_${String(this.#sent.length + 1).padStart(6, '0')}`,
        sequence: this.#sent.length + 1,
      };
      this.#sent.push(sent);
      if (signal?.aborted === true) this.#lateApplied += 1;
      return sent;
    } finally {
      this.#pending -= 1;
      if (this.#pending === 0) for (const wake of this.#idleWaiters.splice(0)) wake();
    }
  }

  /** Requests accepted and not yet applied. */
  pendingApplications(): number {
    return this.#pending;
  }

  /** Messages applied after their sender had given up waiting. */
  lateApplied(): number {
    return this.#lateApplied;
  }

  /**
   * Resolves once no accepted request is waiting to be applied, so that counters read
   * afterwards include every late application. Rejects after `timeoutMs`.
   */
  whenIdle(timeoutMs = 30_000): Promise<void> {
    if (this.#pending === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        const index = this.#idleWaiters.indexOf(wake);
        if (index >= 0) this.#idleWaiters.splice(index, 1);
        reject(new Error(`email provider still has ${this.#pending} pending application(s) after ${timeoutMs} ms`));
      }, timeoutMs);
      const wake = (): void => {
        clearTimeout(timer);
        resolve();
      };
      this.#idleWaiters.push(wake);
    });
  }

  async findByReference(reference: string): Promise<readonly SentEmail[]> {
    this.#lookups += 1;
    return this.#sent.filter((m) => m.reference === reference);
  }

  /** Messages delivered under `reference`: more than 1 means a customer got duplicates. */
  sentForReference(reference: string): number {
    return this.#sent.filter((m) => m.reference === reference).length;
  }

  totalSent(): number {
    return this.#sent.length;
  }

  messages(): readonly SentEmail[] {
    return [...this.#sent];
  }

  stats(): EmailProviderStats {
    return {
      totalSent: this.#sent.length,
      lookups: this.#lookups,
      sentByReference: countBy(this.#sent.map((m) => m.reference)),
      pending: this.#pending,
      lateApplied: this.#lateApplied,
    };
  }
}

export function validateEmailMessage(message: EmailMessage): void {
  const problems: string[] = [];
  if (typeof message.to !== 'string' || !message.to.includes('@')) problems.push('to must be an email address');
  if (typeof message.subject !== 'string' || message.subject === '')
    problems.push('subject must be a non-empty string');
  if (typeof message.body !== 'string') problems.push('body must be a string');
  if (typeof message.reference !== 'string' || message.reference === '')
    problems.push('reference must be a non-empty string');
  if (problems.length > 0) throw new TypeError(`Invalid email message: ${problems.join('; ')}.`);
}
