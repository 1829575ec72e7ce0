import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { exponentialBackoffMs } from '../../runtime/backoff.js';
import { RunsSubscription } from '../../runtime/worker/runs-subscription.js';
import { RUNS_CHANNEL } from '../../runtime/store/channels.js';
import type { WorkerEvent } from '../../runtime/worker/worker-events.js';
import type { Store } from '../../runtime/store/store.js';

/**
 * Unit tests of the worker's parts that need no database: the one backoff helper (checked
 * against the hand-written formulas it replaced) and the runs subscription's state machine,
 * driven through a fake `store.listen` and fake timers — including the orderings a real
 * connection rarely produces (a loss reported before `listen` returned, a late loss report of
 * a subscription already replaced).
 */

describe('exponentialBackoffMs', () => {
  it('gives the delays the worker used before: claim failures, re-listen, untilReachable', () => {
    for (let failures = 1; failures <= 40; failures += 1) {
      expect(exponentialBackoffMs(failures, { firstMs: 100, maxMs: 5_000 })).toBe(Math.min(5_000, 50 * 2 ** failures));
    }
    for (let failedAttempts = 0; failedAttempts <= 40; failedAttempts += 1) {
      expect(exponentialBackoffMs(failedAttempts + 1, { firstMs: 100, maxMs: 5_000 })).toBe(
        Math.min(5_000, 100 * 2 ** failedAttempts),
      );
    }
    let delay = 100;
    for (let attempt = 1; attempt <= 40; attempt += 1) {
      expect(exponentialBackoffMs(attempt, { firstMs: 100, maxMs: 2_000 })).toBe(delay);
      delay = Math.min(2_000, delay * 2);
    }
  });

  it('treats attempts below 1 as the first and never exceeds maxMs, however many attempts', () => {
    expect(exponentialBackoffMs(0, { firstMs: 100, maxMs: 5_000 })).toBe(100);
    expect(exponentialBackoffMs(-3, { firstMs: 100, maxMs: 5_000 })).toBe(100);
    expect(exponentialBackoffMs(5_000, { firstMs: 100, maxMs: 5_000 })).toBe(5_000);
  });
});

/** A `store.listen` whose subscriptions the test controls one by one. */
function fakeListen() {
  interface Sub {
    readonly onNotify: (payload: string) => void;
    readonly onLost: ((error: Error) => void) | undefined;
    closed: boolean;
  }
  const subs: Sub[] = [];
  let refusing = false;
  /** When set, a loss is reported while `listen` is still in progress. */
  let loseDuringListen = false;
  const listen: Store['listen'] = async (channel, onNotify, onLost) => {
    expect(channel).toBe(RUNS_CHANNEL);
    if (refusing) throw new Error('refused');
    const sub: Sub = { onNotify, onLost, closed: false };
    subs.push(sub);
    if (loseDuringListen) {
      loseDuringListen = false;
      sub.closed = true;
      onLost?.(new Error('lost while subscribing'));
    }
    return async () => {
      sub.closed = true;
    };
  };
  return {
    listen,
    subs,
    open: () => subs.filter((s) => !s.closed),
    /** The connection of subscription `index` breaks: it is gone, and says so. */
    lose: (index: number, message = 'terminated') => {
      const sub = subs[index]!;
      sub.closed = true;
      sub.onLost?.(new Error(message));
    },
    refuse: (value: boolean) => (refusing = value),
    loseNextDuringListen: () => (loseDuringListen = true),
  };
}

describe('RunsSubscription', () => {
  let events: WorkerEvent[];
  let hints: number;
  let wanted: boolean;
  let store: ReturnType<typeof fakeListen>;
  let subscription: RunsSubscription;

  beforeEach(() => {
    vi.useFakeTimers();
    events = [];
    hints = 0;
    wanted = true;
    store = fakeListen();
    subscription = new RunsSubscription({
      store: { listen: store.listen },
      isWanted: () => wanted,
      hint: () => (hints += 1),
      emit: (event) => events.push(event),
    });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const types = (): string[] => events.map((e) => e.type);

  it('subscribes quietly; a notification is a hint', async () => {
    await subscription.subscribe();
    expect(store.open()).toHaveLength(1);
    store.subs[0]!.onNotify('run-1');
    expect(hints).toBe(1);
    expect(events).toEqual([]);
  });

  it('a loss emits listener-lost, retries after 100 ms, and the success emits listener-restored and hints', async () => {
    await subscription.subscribe();
    store.lose(0);
    expect(types()).toEqual(['listener-lost']);
    await vi.advanceTimersByTimeAsync(99);
    expect(store.subs).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(store.open()).toHaveLength(1);
    expect(store.subs).toHaveLength(2);
    expect(events.at(-1)).toEqual({ type: 'listener-restored', failedAttempts: 0 });
    expect(hints).toBe(1);
  });

  it('refused attempts back off 100, 200, 400 ms and are counted in listener-restored', async () => {
    await subscription.subscribe();
    store.refuse(true);
    store.lose(0);
    await vi.advanceTimersByTimeAsync(100); // refused (1)
    await vi.advanceTimersByTimeAsync(200); // refused (2)
    expect(types()).toEqual(['listener-lost', 'error', 'error']);
    store.refuse(false);
    await vi.advanceTimersByTimeAsync(399);
    expect(store.subs).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(events.at(-1)).toEqual({ type: 'listener-restored', failedAttempts: 2 });
    expect(store.open()).toHaveLength(1);
  });

  it('a refused first subscribe does not reject; the retry that succeeds emits listener-restored', async () => {
    store.refuse(true);
    await subscription.subscribe();
    expect(events).toMatchObject([{ type: 'error', where: 'listen' }]);
    store.refuse(false);
    await vi.advanceTimersByTimeAsync(200);
    expect(events.at(-1)).toEqual({ type: 'listener-restored', failedAttempts: 1 });
  });

  it('a loss reported before listen returned closes the fresh subscription and retries', async () => {
    store.loseNextDuringListen();
    await subscription.subscribe();
    expect(types()).toEqual(['listener-lost']);
    expect(store.open()).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(100);
    expect(store.open()).toHaveLength(1);
    expect(types()).toEqual(['listener-lost', 'listener-restored']);
  });

  it('stale: the next subscribe replaces the subscription; a late loss report of the old one is ignored', async () => {
    await subscription.subscribe();
    subscription.markStale();
    expect(subscription.stale).toBe(true);
    await subscription.subscribe();
    expect(subscription.stale).toBe(false);
    expect(store.subs.map((s) => s.closed)).toEqual([true, false]);
    store.subs[0]!.onLost!(new Error('old connection ended')); // already closed by the replacement
    await vi.advanceTimersByTimeAsync(10_000);
    expect(events).toEqual([]);
    expect(store.subs).toHaveLength(2);
  });

  it('while not wanted (the worker is stopping) a loss is neither reported nor retried; close() cancels a pending retry', async () => {
    await subscription.subscribe();
    store.lose(0);
    await subscription.close();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(store.subs).toHaveLength(1);

    const other = fakeListen();
    const quiet = new RunsSubscription({
      store: { listen: other.listen },
      isWanted: () => wanted,
      hint: () => {},
      emit: (e) => events.push(e),
    });
    await quiet.subscribe();
    wanted = false;
    other.lose(0);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(types()).toEqual(['listener-lost']);
    await quiet.close();
    expect(other.subs).toHaveLength(1);
  });
});
