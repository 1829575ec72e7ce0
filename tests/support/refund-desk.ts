import { requestJson, type JsonHandler } from '../../examples/fakes/json-http.js';

/**
 * A refund provider for the compensation crash and chaos tests, whose counters live in the test
 * process while workers in child processes call it over HTTP. It does NOT dedupe: every request
 * that reaches it is applied as a new refund, so a compensation performed twice shows up as two
 * refunds of one charge — the runtime's ledger (intent, lookup by key) is the only thing that
 * keeps it at one.
 */
export interface Refund {
  readonly refundId: string;
  readonly key: string;
  readonly chargeId: string;
}

export class FakeRefundDesk {
  readonly #refunds: Refund[] = [];

  /** Applies a refund (always a new one, whatever the key). */
  refund(request: { readonly key: string; readonly chargeId: string }): Refund {
    if (
      typeof request.key !== 'string' ||
      request.key === '' ||
      typeof request.chargeId !== 'string' ||
      request.chargeId === ''
    ) {
      throw new TypeError('Invalid refund request: key and chargeId must be non-empty strings.');
    }
    const refund: Refund = {
      refundId: `rf_${String(this.#refunds.length + 1).padStart(6, '0')}`,
      key: request.key,
      chargeId: request.chargeId,
    };
    this.#refunds.push(refund);
    return refund;
  }

  /** The first refund made under `key`, for a reconcile lookup. */
  find(key: string): Refund | undefined {
    return this.#refunds.find((r) => r.key === key);
  }

  refunds(): readonly Refund[] {
    return [...this.#refunds];
  }

  /** Refunds applied per charge id. */
  refundsByCharge(): ReadonlyMap<string, number> {
    const counts = new Map<string, number>();
    for (const r of this.#refunds) counts.set(r.chargeId, (counts.get(r.chargeId) ?? 0) + 1);
    return counts;
  }
}

/** The desk's HTTP routes, for `startFakeServer(fakes, [refundDeskRoutes(desk)])`. */
export function refundDeskRoutes(desk: FakeRefundDesk): JsonHandler {
  return async (request) => {
    if (request.method === 'POST' && request.path === '/refunds') {
      return { status: 200, body: desk.refund(request.body as { key: string; chargeId: string }) };
    }
    if (request.method === 'GET' && request.path === '/refunds') {
      const key = request.query.get('key');
      if (key === null) throw new TypeError('GET /refunds needs ?key=');
      return { status: 200, body: { refund: desk.find(key) ?? null } };
    }
    return undefined;
  };
}

/** The desk over HTTP, for worker child processes. */
export class HttpRefundDesk {
  constructor(private readonly baseUrl: string) {}

  refund(request: { readonly key: string; readonly chargeId: string }): Promise<Refund> {
    return requestJson<Refund>(`${this.baseUrl}/refunds`, { method: 'POST', body: request });
  }

  async find(key: string): Promise<Refund | undefined> {
    const { refund } = await requestJson<{ refund: Refund | null }>(
      `${this.baseUrl}/refunds?key=${encodeURIComponent(key)}`,
    );
    return refund ?? undefined;
  }
}
