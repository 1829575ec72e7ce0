import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The smallest JSON-over-HTTP plumbing the fakes need so that a worker in a child process can
 * call a provider whose counters live in the parent process. Not a framework: one handler,
 * JSON in, JSON out, errors mapped to status codes.
 */
export interface JsonRequest {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingMessage['headers'];
  readonly body: unknown;
  /**
   * Aborts when the client goes away before the response is sent (it gave up, or its process
   * died). A handler may keep working — a real provider does not undo a request it accepted.
   */
  readonly signal: AbortSignal;
}

export interface JsonResponse {
  readonly status: number;
  readonly body: unknown;
}

export type JsonHandler = (request: JsonRequest) => Promise<JsonResponse | undefined>;

export interface RunningServer {
  /** Base URL, e.g. `http://127.0.0.1:40123`. */
  readonly url: string;
  close(): Promise<void>;
}

/** An error a handler throws to answer with a given status and error name. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly errorName: string,
    message: string,
  ) {
    super(message);
  }
}

/** Serves `handlers` (tried in order; `undefined` = not mine) on 127.0.0.1 at a free port. */
export async function startJsonServer(handlers: readonly JsonHandler[]): Promise<RunningServer> {
  const server = createServer((req, res) => {
    void respond(handlers, req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // Keep-alive sockets of killed workers would otherwise hold the server open.
        server.closeAllConnections();
      }),
  };
}

async function respond(handlers: readonly JsonHandler[], req: IncomingMessage, res: ServerResponse): Promise<void> {
  const clientGone = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) clientGone.abort(new Error('the client went away before the response was sent'));
  });
  let response: JsonResponse;
  try {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const raw = await readBody(req);
    const request: JsonRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      body: raw === '' ? undefined : (JSON.parse(raw) as unknown),
      signal: clientGone.signal,
    };
    response = { status: 404, body: { error: 'NotFound', message: `no route for ${request.method} ${request.path}` } };
    for (const handler of handlers) {
      const answer = await handler(request);
      if (answer !== undefined) {
        response = answer;
        break;
      }
    }
  } catch (error) {
    response =
      error instanceof HttpError
        ? { status: error.status, body: { error: error.errorName, message: error.message } }
        : error instanceof TypeError || error instanceof SyntaxError
          ? { status: 400, body: { error: 'BadRequest', message: error.message } }
          : { status: 500, body: { error: 'InternalError', message: String(error) } };
  }
  if (clientGone.signal.aborted) return; // nobody left to answer
  const payload = JSON.stringify(response.body ?? null);
  res.writeHead(response.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
  res.end(payload);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** The error body every fake server sends, turned back into an error by {@link requestJson}. */
export interface ErrorBody {
  readonly error: string;
  readonly message: string;
}

/**
 * Calls a fake server. A non-2xx answer becomes the error `toError` makes of it (default: an
 * `Error` with the server's message), so clients can rebuild the provider's own error classes.
 * `signal` gives up on the call (fetch rejects with the signal's reason, e.g. a `TimeoutError`
 * from `AbortSignal.timeout`); what the server does with a request it already received is its
 * own business.
 */
export async function requestJson<T>(
  url: string,
  init: {
    readonly method?: string;
    readonly body?: unknown;
    readonly headers?: Record<string, string>;
    readonly signal?: AbortSignal;
  } = {},
  toError: (status: number, body: ErrorBody) => Error | undefined = () => undefined,
): Promise<T> {
  const response = await fetch(url, {
    method: init.method ?? 'GET',
    headers: { 'content-type': 'application/json', ...init.headers },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
    ...(init.signal !== undefined ? { signal: init.signal } : {}),
  });
  const body = (await response.json()) as unknown;
  if (response.ok) return body as T;
  const error = body as ErrorBody;
  throw toError(response.status, error) ?? new Error(`${url}: ${response.status} ${error.error}: ${error.message}`);
}
