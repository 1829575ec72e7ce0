import type {
  EmailGateway,
  EmailMessage,
  EmailProviderStats,
  FakeEmailProvider,
  SendOptions,
  SentEmail,
} from './email-provider.js';
import {
  HttpError,
  requestJson,
  startJsonServer,
  type ErrorBody,
  type JsonHandler,
  type RunningServer,
} from './json-http.js';
import {
  IdempotencyConflictError,
  ProviderUnavailableError,
  type Charge,
  type ChargeOptions,
  type ChargeRequest,
  type FakePaymentProvider,
  type PaymentGateway,
  type PaymentProviderStats,
  type Refund,
  type RefundGateway,
} from './payment-provider.js';

/**
 * Puts in-process fakes behind HTTP so that worker child processes (which may be SIGKILLed at
 * any instruction) call providers whose counters survive them, in the parent process.
 *
 * @example
 * const payments = new FakePaymentProvider();
 * const email = new FakeEmailProvider();
 * const server = await startFakeServer({ payments, email });
 * // in the child: new HttpPaymentGateway(server.url), new HttpEmailGateway(server.url)
 * await server.close();
 */
export async function startFakeServer(
  fakes: { readonly payments?: FakePaymentProvider; readonly email?: FakeEmailProvider },
  extraRoutes: readonly JsonHandler[] = [],
): Promise<RunningServer> {
  const handlers: JsonHandler[] = [];
  if (fakes.payments !== undefined) handlers.push(paymentRoutes(fakes.payments));
  if (fakes.email !== undefined) handlers.push(emailRoutes(fakes.email));
  return startJsonServer([...handlers, ...extraRoutes]);
}

function paymentRoutes(payments: FakePaymentProvider): JsonHandler {
  return async (request) => {
    if (request.method === 'POST' && request.path === '/payments/charges') {
      const header = request.headers['idempotency-key'];
      const idempotencyKey = typeof header === 'string' ? header : undefined;
      try {
        const charge = await payments.charge(
          request.body as ChargeRequest,
          idempotencyKey === undefined ? {} : { idempotencyKey },
        );
        return { status: 200, body: charge };
      } catch (error) {
        if (error instanceof IdempotencyConflictError) throw new HttpError(409, error.name, error.message);
        if (error instanceof ProviderUnavailableError) throw new HttpError(503, error.name, error.message);
        throw error;
      }
    }
    if (request.method === 'GET' && request.path === '/payments/charges') {
      const key = request.query.get('idempotencyKey');
      if (key === null) throw new TypeError('GET /payments/charges needs ?idempotencyKey=');
      return { status: 200, body: { charge: (await payments.findCharge(key)) ?? null } };
    }
    if (request.method === 'POST' && request.path === '/payments/refunds') {
      const header = request.headers['idempotency-key'];
      const idempotencyKey = typeof header === 'string' ? header : undefined;
      const { reference } = request.body as { reference: string };
      try {
        return {
          status: 200,
          body: await payments.refund(reference, idempotencyKey === undefined ? {} : { idempotencyKey }),
        };
      } catch (error) {
        if (error instanceof IdempotencyConflictError) throw new HttpError(409, error.name, error.message);
        throw error;
      }
    }
    if (request.method === 'GET' && request.path === '/payments/stats') return { status: 200, body: payments.stats() };
    return undefined;
  };
}

function emailRoutes(email: FakeEmailProvider): JsonHandler {
  return async (request) => {
    if (request.method === 'POST' && request.path === '/email/messages') {
      // A client that hangs up does not take its request back: the provider applies it anyway
      // (counted as a late application) and nobody hears the answer.
      return { status: 200, body: await email.send(request.body as EmailMessage, { signal: request.signal }) };
    }
    if (request.method === 'GET' && request.path === '/email/messages') {
      const reference = request.query.get('reference');
      if (reference === null) throw new TypeError('GET /email/messages needs ?reference=');
      return { status: 200, body: { messages: await email.findByReference(reference) } };
    }
    if (request.method === 'GET' && request.path === '/email/stats') return { status: 200, body: email.stats() };
    return undefined;
  };
}

function paymentError(status: number, body: ErrorBody): Error | undefined {
  if (status === 409) return new IdempotencyConflictError(body.message);
  if (status === 503) return new ProviderUnavailableError(body.message);
  if (status === 400) return new TypeError(body.message);
  return undefined;
}

/** {@link PaymentGateway} and {@link RefundGateway} over HTTP, talking to a {@link startFakeServer} in another process. */
export class HttpPaymentGateway implements PaymentGateway, RefundGateway {
  constructor(private readonly baseUrl: string) {}

  charge(request: ChargeRequest, options: ChargeOptions = {}): Promise<Charge> {
    return requestJson<Charge>(
      `${this.baseUrl}/payments/charges`,
      {
        method: 'POST',
        body: request,
        ...(options.idempotencyKey !== undefined ? { headers: { 'idempotency-key': options.idempotencyKey } } : {}),
      },
      paymentError,
    );
  }

  async findCharge(idempotencyKey: string): Promise<Charge | undefined> {
    const url = `${this.baseUrl}/payments/charges?idempotencyKey=${encodeURIComponent(idempotencyKey)}`;
    const { charge } = await requestJson<{ charge: Charge | null }>(url, {}, paymentError);
    return charge ?? undefined;
  }

  refund(reference: string, options: ChargeOptions = {}): Promise<Refund> {
    return requestJson<Refund>(
      `${this.baseUrl}/payments/refunds`,
      {
        method: 'POST',
        body: { reference },
        ...(options.idempotencyKey !== undefined ? { headers: { 'idempotency-key': options.idempotencyKey } } : {}),
      },
      paymentError,
    );
  }

  stats(): Promise<PaymentProviderStats> {
    return requestJson<PaymentProviderStats>(`${this.baseUrl}/payments/stats`);
  }
}

function emailError(status: number, body: ErrorBody): Error | undefined {
  return status === 400 ? new TypeError(body.message) : undefined;
}

/** {@link EmailGateway} over HTTP, talking to a {@link startFakeServer} in another process. */
export class HttpEmailGateway implements EmailGateway {
  constructor(private readonly baseUrl: string) {}

  /** `options.signal` gives up on the HTTP call (rejecting with its reason); the server may still apply the message. */
  send(message: EmailMessage, options: SendOptions = {}): Promise<SentEmail> {
    return requestJson<SentEmail>(
      `${this.baseUrl}/email/messages`,
      { method: 'POST', body: message, ...(options.signal !== undefined ? { signal: options.signal } : {}) },
      emailError,
    );
  }

  async findByReference(reference: string): Promise<readonly SentEmail[]> {
    const url = `${this.baseUrl}/email/messages?reference=${encodeURIComponent(reference)}`;
    const { messages } = await requestJson<{ messages: SentEmail[] }>(url, {}, emailError);
    return messages;
  }

  stats(): Promise<EmailProviderStats> {
    return requestJson<EmailProviderStats>(`${this.baseUrl}/email/stats`);
  }
}
