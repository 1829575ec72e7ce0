import { createHash } from 'node:crypto';

export interface ChargeRequest {
  /** Business reference the charge is for (an order id); counted per reference. */
  readonly reference: string;
  readonly amountCents: number;
  readonly currency: string;
  readonly customerId: string;
}

export interface Charge {
  readonly id: string;
  readonly reference: string;
  readonly amountCents: number;
  readonly currency: string;
  readonly customerId: string;
  readonly idempotencyKey: string | null;
  /** Sequence number of this charge at the provider (1 for the first charge ever). */
  readonly sequence: number;
}

export interface ChargeOptions {
  /** Sent as the `Idempotency-Key` header by the HTTP client. */
  readonly idempotencyKey?: string;
}

/** The provider's API as a workflow handler sees it; implemented in-process and over HTTP. */
export interface PaymentGateway {
  charge(request: ChargeRequest, options?: ChargeOptions): Promise<Charge>;
  /** The charge made under `idempotencyKey`, if any (a provider-side lookup by key). */
  findCharge(idempotencyKey: string): Promise<Charge | undefined>;
}

/** A refund of everything charged for one business reference. */
export interface Refund {
  readonly id: string;
  readonly reference: string;
  /** What was given back: 0 when nothing had been charged for the reference. */
  readonly amountCents: number;
  /** The charges it refunded. */
  readonly chargeIds: readonly string[];
  readonly idempotencyKey: string | null;
}

/**
 * Refunds by business reference, the way a checkout is cancelled at a PSP when the shop gave up
 * waiting for its payment: whatever the customer paid for it (a late payment whose webhook never
 * reached the shop) goes back. Separate from {@link PaymentGateway}, which the demo also serves
 * over HTTP.
 */
export interface RefundGateway {
  refund(reference: string, options?: ChargeOptions): Promise<Refund>;
}

/** Same idempotency key, different request body: the provider refuses rather than guess. */
export class IdempotencyConflictError extends Error {
  override readonly name = 'IdempotencyConflictError';
}

/** A deliberate failure injected with {@link FakePaymentProvider.failNext}. */
export class ProviderUnavailableError extends Error {
  override readonly name = 'ProviderUnavailableError';
}

/**
 * `before-apply`: the request fails and nothing is charged (a clean error).
 * `after-apply`: the charge is applied, then the caller gets an error (a timeout whose outcome
 * is unknown to the caller — the case reconcile and same-key retries exist for).
 */
export type InjectedFailure = 'before-apply' | 'after-apply';

export interface FakePaymentProviderOptions {
  /** Delay before a charge is applied, to widen a crash window in tests. */
  readonly latencyMs?: number;
}

export interface PaymentProviderStats {
  readonly totalCharges: number;
  readonly requests: number;
  readonly replays: number;
  readonly conflicts: number;
  readonly chargesByKey: Readonly<Record<string, number>>;
  readonly chargesByReference: Readonly<Record<string, number>>;
}

interface StoredCharge {
  readonly charge: Charge;
  readonly requestHash: string;
}

/**
 * A Stripe-like card processor, in memory, that counts what it really did.
 *
 * It honours idempotency keys the way Stripe documents them: the first request under a key is
 * applied and its result remembered; a repeat with the same key and the same body returns that
 * first result without charging again; a repeat with the same key and a *different* body is
 * refused with {@link IdempotencyConflictError}. Requests without a key are charged every time.
 *
 * The counters (`chargesByKey`, `chargesByReference`, `totalCharges`) are the ground truth the
 * demo and the chaos tests compare the workflow ledger against: they count charges applied, not
 * requests received.
 *
 * @example
 * const payments = new FakePaymentProvider();
 * const first = await payments.charge({ reference: 'order-1', amountCents: 1200, currency: 'eur', customerId: 'c1' }, { idempotencyKey: 'charge:order-1' });
 * const again = await payments.charge({ reference: 'order-1', amountCents: 1200, currency: 'eur', customerId: 'c1' }, { idempotencyKey: 'charge:order-1' });
 * // again.id === first.id, payments.totalCharges() === 1
 */
export class FakePaymentProvider implements PaymentGateway, RefundGateway {
  readonly #byKey = new Map<string, StoredCharge>();
  readonly #charges: Charge[] = [];
  readonly #refunds: Refund[] = [];
  readonly #refundsByKey = new Map<string, Refund>();
  /** Charges already refunded, by id: a charge is given back once, whatever the keys. */
  readonly #refunded = new Set<string>();
  readonly #failures: InjectedFailure[] = [];
  readonly #latencyMs: number;
  #requests = 0;
  #replays = 0;
  #conflicts = 0;

  constructor(options: FakePaymentProviderOptions = {}) {
    this.#latencyMs = options.latencyMs ?? 0;
  }

  async charge(request: ChargeRequest, options: ChargeOptions = {}): Promise<Charge> {
    validateChargeRequest(request);
    this.#requests += 1;
    if (this.#latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.#latencyMs));
    const key = options.idempotencyKey;
    const requestHash = hashRequest(request);
    if (key !== undefined) {
      const stored = this.#byKey.get(key);
      if (stored !== undefined) {
        if (stored.requestHash !== requestHash) {
          this.#conflicts += 1;
          throw new IdempotencyConflictError(
            `Idempotency key "${key}" was already used with a different request; use a new key for a new charge.`,
          );
        }
        this.#replays += 1;
        return stored.charge;
      }
    }
    const failure = this.#failures.shift();
    if (failure === 'before-apply')
      throw new ProviderUnavailableError('payment provider unavailable (injected, nothing charged)');
    const charge: Charge = {
      id: `ch_${String(this.#charges.length + 1).padStart(6, '0')}`,
      reference: request.reference,
      amountCents: request.amountCents,
      currency: request.currency,
      customerId: request.customerId,
      idempotencyKey: key ?? null,
      sequence: this.#charges.length + 1,
    };
    this.#charges.push(charge);
    if (key !== undefined) this.#byKey.set(key, { charge, requestHash });
    if (failure === 'after-apply')
      throw new ProviderUnavailableError('payment provider timed out (injected, charge was applied)');
    return charge;
  }

  async findCharge(idempotencyKey: string): Promise<Charge | undefined> {
    return this.#byKey.get(idempotencyKey)?.charge;
  }

  /**
   * Refunds every charge made for `reference` that was not refunded yet — possibly none, a
   * refund of 0. Deduped like charges: the same key again returns the first refund.
   */
  async refund(reference: string, options: ChargeOptions = {}): Promise<Refund> {
    if (typeof reference !== 'string' || reference === '')
      throw new TypeError('Invalid refund request: reference must be a non-empty string.');
    this.#requests += 1;
    const key = options.idempotencyKey;
    const stored = key === undefined ? undefined : this.#refundsByKey.get(key);
    if (stored !== undefined) {
      if (stored.reference !== reference) {
        this.#conflicts += 1;
        throw new IdempotencyConflictError(
          `Idempotency key "${key}" was already used to refund another reference; use a new key.`,
        );
      }
      this.#replays += 1;
      return stored;
    }
    const charges = this.#charges.filter((c) => c.reference === reference && !this.#refunded.has(c.id));
    for (const charge of charges) this.#refunded.add(charge.id);
    const refund: Refund = {
      id: `re_${String(this.#refunds.length + 1).padStart(6, '0')}`,
      reference,
      amountCents: charges.reduce((sum, c) => sum + c.amountCents, 0),
      chargeIds: charges.map((c) => c.id),
      idempotencyKey: key ?? null,
    };
    this.#refunds.push(refund);
    if (key !== undefined) this.#refundsByKey.set(key, refund);
    return refund;
  }

  /** Refunds made for `reference` (each counted once, however often its key was sent). */
  refundsForReference(reference: string): readonly Refund[] {
    return this.#refunds.filter((r) => r.reference === reference);
  }

  /** Makes the next `count` charge requests that would apply fail in the given way. */
  failNext(count: number, failure: InjectedFailure): void {
    for (let i = 0; i < count; i += 1) this.#failures.push(failure);
  }

  /** Charges applied under `idempotencyKey` (0 or 1 for a provider that dedupes). */
  chargesForKey(idempotencyKey: string): number {
    return this.#charges.filter((c) => c.idempotencyKey === idempotencyKey).length;
  }

  /** Charges applied for a business reference, with or without a key. */
  chargesForReference(reference: string): number {
    return this.#charges.filter((c) => c.reference === reference).length;
  }

  totalCharges(): number {
    return this.#charges.length;
  }

  charges(): readonly Charge[] {
    return [...this.#charges];
  }

  stats(): PaymentProviderStats {
    return {
      totalCharges: this.#charges.length,
      requests: this.#requests,
      replays: this.#replays,
      conflicts: this.#conflicts,
      chargesByKey: countBy(this.#charges.flatMap((c) => (c.idempotencyKey === null ? [] : [c.idempotencyKey]))),
      chargesByReference: countBy(this.#charges.map((c) => c.reference)),
    };
  }
}

export function validateChargeRequest(request: ChargeRequest): void {
  const problems: string[] = [];
  if (typeof request.reference !== 'string' || request.reference === '')
    problems.push('reference must be a non-empty string');
  if (!Number.isInteger(request.amountCents) || request.amountCents <= 0)
    problems.push('amountCents must be a positive integer');
  if (typeof request.currency !== 'string' || !/^[a-z]{3}$/.test(request.currency))
    problems.push('currency must be a lower-case ISO code such as "eur"');
  if (typeof request.customerId !== 'string' || request.customerId === '')
    problems.push('customerId must be a non-empty string');
  if (problems.length > 0) throw new TypeError(`Invalid charge request: ${problems.join('; ')}.`);
}

function hashRequest(request: ChargeRequest): string {
  const canonical = JSON.stringify([request.reference, request.amountCents, request.currency, request.customerId]);
  return createHash('sha256').update(canonical).digest('hex');
}

export function countBy(values: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of [...values].sort()) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}
