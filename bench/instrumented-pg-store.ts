import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { INT8_OID, parseInt8, type Store } from '../runtime/store/store.js';
import type { LedgerflowDatabase } from '../runtime/store/tables.js';

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
 * A `pg`-pool store, as the runtime's own (runtime/store/pg), whose clients count and classify
 * what they send. For the benchmark only: the runtime's store must not pay for counting.
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

  const types = {
    getTypeParser: ((oid: number, format?: string) =>
      oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
  };
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.maxConnections,
    application_name: options.applicationName,
    types,
    Client: CountingClient,
  });
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = new Kysely<LedgerflowDatabase>({ dialect: new PostgresDialect({ pool }) });
  return {
    kind: 'pg',
    db,
    location: `PostgreSQL (instrumented) ${new URL(options.connectionString).pathname}`,
    counts,
    reset() {
      Object.assign(counts, { roundTrips: 0, claimCommits: 0, stepCommits: 0, otherCommits: 0, rollbacks: 0 });
    },
    async listen(channel, onNotify) {
      const client = new pg.Client({ connectionString: options.connectionString, application_name: options.applicationName, types });
      client.on('error', () => {});
      await client.connect();
      client.on('notification', (message) => {
        if (message.channel === channel) onNotify(message.payload ?? '');
      });
      await client.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      return async () => {
        await client.end().catch(() => {});
      };
    },
    async close() {
      await db.destroy();
    },
  };
}
