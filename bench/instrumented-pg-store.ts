import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createPgStore } from '../runtime/store/pg/pg-store.js';
import type { Store } from '../runtime/store/store.js';

/**
 * What the worker's driver sent, by transaction: every query is one round trip; every
 * transaction (an explicit BEGIN…COMMIT, or one statement on its own) is one commit, classed by
 * what it touched so that step commits can be told from claims and bookkeeping reads.
 */
export interface DriverCounts {
  roundTrips: number;
  /** Claim statements (each claims up to the worker's free slots). */
  claimCommits: number;
  /** Transactions that wrote a step's attempt, ledger row or result, other than claims. */
  stepCommits: number;
  /** Everything else that committed: polls, lease renewals, start-up checks, LISTEN. */
  otherCommits: number;
  rollbacks: number;
  /** Time from sending each query to its answer, summed by what it was (ms). */
  readonly latencyMs: Record<QueryClass, { count: number; ms: number }>;
}

export type QueryClass = 'claim' | 'begin' | 'commit' | 'step statement' | 'other';

function emptyCounts(): DriverCounts {
  const zero = () => ({ count: 0, ms: 0 });
  return {
    roundTrips: 0,
    claimCommits: 0,
    stepCommits: 0,
    otherCommits: 0,
    rollbacks: 0,
    latencyMs: { claim: zero(), begin: zero(), commit: zero(), 'step statement': zero(), other: zero() },
  };
}

export interface InstrumentedStore extends Store {
  readonly counts: DriverCounts;
  reset(): void;
}

const CLAIM = /\bclaimed AS\b/i;
const STEP_WRITE = /\b(INSERT INTO|UPDATE)\s+ledgerflow\.(step_attempt|step_effect|step_result)\b/i;

/**
 * The runtime's `pg` store with clients that count and classify what they send. For the
 * benchmark only: the runtime's store must not pay for counting.
 */
export function createInstrumentedPgStore(options: {
  readonly connectionString: string;
  readonly maxConnections: number;
  readonly applicationName: string;
}): InstrumentedStore {
  const counts = emptyCounts();
  const finish = (kind: 'claim' | 'step' | 'other'): void => {
    if (kind === 'claim') counts.claimCommits += 1;
    else if (kind === 'step') counts.stepCommits += 1;
    else counts.otherCommits += 1;
  };

  class CountingClient extends pg.Client {
    /** The open explicit transaction's class, `undefined` outside one. */
    transaction: 'claim' | 'step' | 'other' | undefined;
  }
  const original = pg.Client.prototype.query;
  CountingClient.prototype.query = function countingQuery(this: CountingClient, ...args: unknown[]) {
    counts.roundTrips += 1;
    const first = args[0];
    const text =
      typeof first === 'string'
        ? first
        : typeof first === 'object' && first !== null && 'text' in first
          ? String(first.text)
          : '';
    const verb = text.trim().toLowerCase();
    let queryClass: QueryClass = 'other';
    if (verb === 'begin' || verb.startsWith('begin ')) {
      queryClass = 'begin';
      this.transaction = 'other';
    } else if (verb === 'commit') {
      queryClass = 'commit';
      finish(this.transaction ?? 'other');
      this.transaction = undefined;
    } else if (verb === 'rollback') {
      counts.rollbacks += 1;
      this.transaction = undefined;
    } else {
      const kind = CLAIM.test(text) ? 'claim' : STEP_WRITE.test(text) ? 'step' : 'other';
      queryClass = kind === 'claim' ? 'claim' : kind === 'step' ? 'step statement' : 'other';
      if (this.transaction === undefined) finish(kind);
      else if (kind !== 'other' && this.transaction !== 'claim') this.transaction = kind;
    }
    const sentAt = performance.now();
    const answered = (): void => {
      const slot = counts.latencyMs[queryClass];
      slot.count += 1;
      slot.ms += performance.now() - sentAt;
    };
    const result = (original as (...a: unknown[]) => unknown).apply(this, args);
    if (result instanceof Promise) result.then(answered, answered);
    return result;
  } as typeof original;

  const store = createPgStore({
    connectionString: options.connectionString,
    maxConnections: options.maxConnections,
    applicationName: options.applicationName,
    clientClass: CountingClient,
  });
  return {
    ...store,
    counts,
    reset() {
      Object.assign(counts, emptyCounts());
    },
  };
}
