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

/** The provider's API as a workflow handler sees it; implemented in-process and over HTTP. */
export interface EmailGateway {
  send(message: EmailMessage): Promise<SentEmail>;
  /** Messages stored under `reference`, oldest first (a provider-side search by tag). */
  findByReference(reference: string): Promise<readonly SentEmail[]>;
}

export interface EmailProviderStats {
  readonly totalSent: number;
  readonly lookups: number;
  readonly sentByReference: Readonly<Record<string, number>>;
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
 */
export class FakeEmailProvider implements EmailGateway {
  readonly #sent: SentEmail[] = [];
  readonly #latencyMs: number;
  #lookups = 0;

  constructor(options: { readonly latencyMs?: number } = {}) {
    this.#latencyMs = options.latencyMs ?? 0;
  }

  async send(message: EmailMessage): Promise<SentEmail> {
    validateEmailMessage(message);
    if (this.#latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.#latencyMs));
    const sent: SentEmail = {
      to: message.to,
      subject: message.subject,
      body: message.body,
      reference: message.reference,
      messageId: `msg_${String(this.#sent.length + 1).padStart(6, '0')}`,
      sequence: this.#sent.length + 1,
    };
    this.#sent.push(sent);
    return sent;
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
    };
  }
}

export function validateEmailMessage(message: EmailMessage): void {
  const problems: string[] = [];
  if (typeof message.to !== 'string' || !message.to.includes('@')) problems.push('to must be an email address');
  if (typeof message.subject !== 'string' || message.subject === '') problems.push('subject must be a non-empty string');
  if (typeof message.body !== 'string') problems.push('body must be a string');
  if (typeof message.reference !== 'string' || message.reference === '') problems.push('reference must be a non-empty string');
  if (problems.length > 0) throw new TypeError(`Invalid email message: ${problems.join('; ')}.`);
}
