import { HttpError, requestJson, type JsonHandler } from '../fakes/json-http.js';

/**
 * The contrast case: an at-least-once message queue with a visibility timeout, as SQS or a
 * Redis list with a processing set behaves. A consumer receives a message, does its work and
 * acks; if it dies before the ack, the message becomes visible again and is redelivered. The
 * queue knows nothing about what the work already did.
 */
/** How long a received message stays invisible before it is redelivered. */
export const NAIVE_VISIBILITY_MS = 500;

/** An (order, step) at which a worker dies right after the call returned. */
export interface NaiveCrash {
  readonly orderId: string;
  readonly step: 'chargeCard' | 'sendReceipt';
}

export interface QueueMessage<T> {
  readonly id: string;
  readonly body: T;
  /** 1 on first delivery; more means the message was redelivered after a missing ack. */
  readonly deliveries: number;
}

interface Entry<T> {
  readonly id: string;
  readonly body: T;
  deliveries: number;
  invisibleUntil: number;
  acked: boolean;
}

export class NaiveQueue<T> {
  readonly #entries: Entry<T>[] = [];

  enqueue(body: T): string {
    const id = `m${this.#entries.length + 1}`;
    this.#entries.push({ id, body, deliveries: 0, invisibleUntil: 0, acked: false });
    return id;
  }

  receive(visibilityMs: number): QueueMessage<T> | undefined {
    const now = Date.now();
    const entry = this.#entries.find((e) => !e.acked && e.invisibleUntil <= now);
    if (entry === undefined) return undefined;
    entry.deliveries += 1;
    entry.invisibleUntil = now + visibilityMs;
    return { id: entry.id, body: entry.body, deliveries: entry.deliveries };
  }

  ack(id: string): void {
    const entry = this.#entries.find((e) => e.id === id);
    if (entry === undefined) throw new HttpError(404, 'UnknownMessage', `no message ${id}`);
    entry.acked = true;
  }

  /** Messages not yet acked (visible or in flight). */
  unacked(): number {
    return this.#entries.filter((e) => !e.acked).length;
  }

  redeliveries(): number {
    return this.#entries.reduce((sum, e) => sum + Math.max(0, e.deliveries - 1), 0);
  }
}

/** Serves a queue at `/queue/...` next to the fakes (see `startFakeServer`'s extra routes). */
export function queueRoutes<T>(queue: NaiveQueue<T>): JsonHandler {
  return async (request) => {
    if (request.method === 'POST' && request.path === '/queue/receive') {
      const { visibilityMs } = request.body as { visibilityMs: number };
      return { status: 200, body: { message: queue.receive(visibilityMs) ?? null, unacked: queue.unacked() } };
    }
    if (request.method === 'POST' && request.path === '/queue/ack') {
      queue.ack((request.body as { id: string }).id);
      return { status: 200, body: { ok: true } };
    }
    return undefined;
  };
}

export class HttpNaiveQueue<T> {
  constructor(private readonly baseUrl: string) {}

  /** The next visible message (or none) and how many messages are still unacked overall. */
  receive(visibilityMs: number): Promise<{ message: QueueMessage<T> | null; unacked: number }> {
    return requestJson(`${this.baseUrl}/queue/receive`, { method: 'POST', body: { visibilityMs } });
  }

  async ack(id: string): Promise<void> {
    await requestJson(`${this.baseUrl}/queue/ack`, { method: 'POST', body: { id } });
  }
}
