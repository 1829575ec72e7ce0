import { requestJson, type JsonHandler } from '../../examples/fakes/json-http.js';
import { effectOutput } from './compose.js';

/**
 * The fuzzer's provider, living in the test process while workers in child processes call it
 * over HTTP: it applies effects by key and counts every application (an effect it does not dedupe
 * is applied again on every call, so a second perform shows up as a count of two), undoes them,
 * answers reconcile lookups, and records when each handler started and ended (on which worker,
 * for which run, step and attempt) so that concurrency and rate limits can be checked from
 * outside the database.
 */
export interface HandlerSpan {
  readonly id: number;
  readonly worker: string;
  readonly runId: string;
  readonly workflow: string;
  readonly step: string;
  readonly attempt: number;
  /** Wall-clock milliseconds (Date.now()) of this host. */
  startedAt: number;
  endedAt: number | undefined;
}

export interface ApplyRequest {
  readonly key: string;
  readonly worker: string;
  /** The provider dedupes this key (idempotentByKey): a second call returns the first answer. */
  readonly dedupe: boolean;
  readonly oversized: boolean;
  /** Ask the test to SIGKILL the calling worker once the effect is applied (never answered then). */
  readonly killAfter: boolean;
}

export class FuzzDesk {
  /** Applications per key (a deduped repeat is not an application). */
  readonly applied = new Map<string, number>();
  /** Undos per original key. */
  readonly undone = new Map<string, number>();
  readonly spans: HandlerSpan[] = [];
  readonly #answers = new Map<string, unknown>();
  #nextSpan = 1;

  constructor(private readonly onKillRequest: (worker: string) => void) {}

  apply(request: ApplyRequest): unknown {
    const known = this.#answers.get(request.key);
    if (request.dedupe && known !== undefined) return known;
    this.applied.set(request.key, (this.applied.get(request.key) ?? 0) + 1);
    const answer = effectOutput(request.key, request.oversized);
    this.#answers.set(request.key, answer);
    if (request.killAfter) this.onKillRequest(request.worker);
    return answer;
  }

  find(key: string): unknown {
    return this.#answers.get(key) ?? null;
  }

  /** Undoes the effect of key `of`: always a new undo (the desk does not dedupe undos), kept for lookups by `undoKey`. */
  undo(undoKey: string, of: string): unknown {
    this.undone.set(of, (this.undone.get(of) ?? 0) + 1);
    const answer = { undone: of };
    this.#answers.set(undoKey, answer);
    return answer;
  }

  enter(span: Omit<HandlerSpan, 'id' | 'startedAt' | 'endedAt'>): number {
    const id = this.#nextSpan++;
    // Provisional: the worker's own start and end arrive with `leave` (a killed worker's never do).
    this.spans.push({ ...span, id, startedAt: Date.now(), endedAt: undefined });
    return id;
  }

  /**
   * The handler ended: its start and end as the worker's clock read them around the body (all
   * processes share this host's clock), so a test process busy elsewhere does not bunch up starts.
   */
  leave(id: number, startedAt: number, endedAt: number): void {
    const span = this.spans.find((s) => s.id === id);
    if (span !== undefined && span.endedAt === undefined) {
      span.startedAt = startedAt;
      span.endedAt = endedAt;
    }
  }

  /** A worker died (SIGKILL): its handlers ended then. */
  workerDied(worker: string): void {
    const now = Date.now();
    for (const span of this.spans) if (span.worker === worker && span.endedAt === undefined) span.endedAt = now;
  }
}

export function fuzzDeskRoutes(desk: FuzzDesk): JsonHandler {
  return async (request) => {
    const body = request.body as Record<string, unknown>;
    if (request.method === 'POST' && request.path === '/fz/apply')
      return { status: 200, body: desk.apply(body as unknown as ApplyRequest) };
    if (request.method === 'POST' && request.path === '/fz/undo') {
      return { status: 200, body: desk.undo(String(body['key']), String(body['of'])) };
    }
    if (request.method === 'GET' && request.path === '/fz/find')
      return { status: 200, body: { found: desk.find(request.query.get('key') ?? '') } };
    if (request.method === 'POST' && request.path === '/fz/enter') {
      return {
        status: 200,
        body: { id: desk.enter(body as unknown as Omit<HandlerSpan, 'id' | 'startedAt' | 'endedAt'>) },
      };
    }
    if (request.method === 'POST' && request.path === '/fz/leave') {
      desk.leave(Number(body['id']), Number(body['startedAt']), Number(body['endedAt']));
      return { status: 200, body: {} };
    }
    return undefined;
  };
}

/** The desk over HTTP, for worker child processes. */
export class HttpFuzzDesk {
  constructor(
    private readonly baseUrl: string,
    readonly worker: string,
  ) {}

  apply(request: Omit<ApplyRequest, 'worker'>): Promise<{ ref: string; pad: string }> {
    return requestJson(`${this.baseUrl}/fz/apply`, { method: 'POST', body: { ...request, worker: this.worker } });
  }

  undo(key: string, of: string): Promise<{ undone: string }> {
    return requestJson(`${this.baseUrl}/fz/undo`, { method: 'POST', body: { key, of } });
  }

  async find<T>(key: string): Promise<T | undefined> {
    const { found } = await requestJson<{ found: T | null }>(`${this.baseUrl}/fz/find?key=${encodeURIComponent(key)}`);
    return found ?? undefined;
  }

  /** Runs `body` as one handler span: the desk knows it started before it runs, and that it ended before it returns. */
  async span<T>(
    ctx: { readonly runId: string; readonly workflowName: string; readonly stepName: string; readonly attempt: number },
    body: () => Promise<T>,
  ): Promise<T> {
    const { id } = await requestJson<{ id: number }>(`${this.baseUrl}/fz/enter`, {
      method: 'POST',
      body: {
        worker: this.worker,
        runId: ctx.runId,
        workflow: ctx.workflowName,
        step: ctx.stepName,
        attempt: ctx.attempt,
      },
    });
    const startedAt = Date.now();
    try {
      return await body();
    } finally {
      await requestJson(`${this.baseUrl}/fz/leave`, { method: 'POST', body: { id, startedAt, endedAt: Date.now() } });
    }
  }
}
