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
  const counts: DriverCounts = { roundTrips: 0, claimCommits: 0, stepCommits: 0, otherCommits: 0, rollbacks: 0 };
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
    const text = typeof first === 'string' ? first : typeof first === 'object' && first !== null && 'text' in first ? String(first.text) : '';
    const verb = text.trim().toLowerCase();
    if (verb === 'begin' || verb.startsWith('begin ')) {
      this.transaction = 'other';
    } else if (verb === 'commit') {
      finish(this.transaction ?? 'other');
      this.transaction = undefined;
    } else if (verb === 'rollback') {
      counts.rollbacks += 1;
      this.transaction = undefined;
    } else {
      const kind = CLAIM.test(text) ? 'claim' : STEP_WRITE.test(text) ? 'step' : 'other';
      if (this.transaction === undefined) finish(kind);
      else if (kind !== 'other' && this.transaction !== 'claim') this.transaction = kind;
    }
    return (original as (...a: unknown[]) => unknown).apply(this, args);
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
      Object.assign(counts, { roundTrips: 0, claimCommits: 0, stepCommits: 0, otherCommits: 0, rollbacks: 0 });
    },
  };
}
