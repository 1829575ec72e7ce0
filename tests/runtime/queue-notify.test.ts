import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUNS_CHANNEL } from 'ledgerflow/schema';
import { migrateForTest } from '../support/migrate-for-test.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';
import { concurrencyQueue, limited, QUEUE_WORKFLOWS } from './fixtures/queue-workflows.js';
import { acquireSlotStatement, registerQueueStatement } from '../../runtime/worker/queue-slots.js';
import { QUEUE_NO_PARTITION } from '../../runtime/store/queue-partition.js';

/**
 * A grant announces on the runs channel only a run it wakes from the line (core 0022). A run that
 * asks and is granted at once is running: a notification would make its ask a notifying commit
 * (serialised by PostgreSQL) and send every listening worker to claim for nothing. Absence is read
 * without a timer: notifications arrive in commit order, so once a NOTIFY committed after the ask
 * has arrived, any notification of the ask would have arrived before it.
 */
describe('queue grants on the runs channel [pg]', () => {
  const ASKER = '00000000-0000-4000-8000-00000000d001';
  const HOLDER = '00000000-0000-4000-8000-00000000d002';
  const WAITER = '00000000-0000-4000-8000-00000000d003';
  let store: TestStore;
  beforeAll(async () => {
    store = await createPgTestStore();
    await migrateForTest(store, QUEUE_WORKFLOWS);
    await registerQueueStatement(concurrencyQueue).execute(store.db);
    await sql`
      INSERT INTO ledgerflow.workflow_run (id, workflow_name, workflow_version, input, status, fencing_token, lease_owner, lease_expires_at, current_step)
      SELECT id::uuid, ${limited.name}, ${limited.version}, '{}'::jsonb, 'running', 1, 'test', statement_timestamp() + interval '1 hour', 1
        FROM unnest(ARRAY[${ASKER}, ${HOLDER}, ${WAITER}]) AS id`.execute(store.db);
  }, 120_000);
  afterAll(() => store.close());

  it("sends nothing for a slot granted in the asker's own ask, and announces a run woken from the line", async () => {
    const listener = new pg.Client({ connectionString: store.url });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (n) => {
      if (n.channel === RUNS_CHANNEL && n.payload !== undefined) heard.push(n.payload);
    });
    await listener.query(`LISTEN ${RUNS_CHANNEL}`);
    const sentinel = async (name: string) => {
      await listener.query(`SELECT pg_notify($1, $2)`, [RUNS_CHANNEL, name]);
      for (let tries = 0; !heard.includes(name); tries++) {
        if (tries > 500) throw new Error(`the sentinel ${name} never arrived`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };
    try {
      const ask = (runId: string) =>
        acquireSlotStatement(concurrencyQueue.name, QUEUE_NO_PARTITION, { runId, fencingToken: 1 }, 'work').execute(
          store.db,
        );
      // Two slots, both granted at once to the runs that ask.
      expect((await ask(ASKER)).rows).toEqual([{ retry_at: null }]);
      expect((await ask(HOLDER)).rows).toEqual([{ retry_at: null }]);
      await sentinel('after-own-grants');
      expect(heard).toEqual(['after-own-grants']);

      // The third asks, finds the queue full and parks in line (as awaitQueueSlots does).
      expect((await ask(WAITER)).rows[0]!.retry_at).not.toBeNull();
      await sql`
        UPDATE ledgerflow.workflow_run
           SET status = 'waiting', run_after = 'infinity', lease_owner = NULL, lease_expires_at = NULL,
               waiting_for = jsonb_build_object('kind', 'queue', 'step', 'work', 'queue', ${concurrencyQueue.name}::text, 'partition', ${QUEUE_NO_PARTITION}::text, 'until', null)
         WHERE id = ${WAITER}`.execute(store.db);
      // The holder gives its slot back: the waiter is granted it, woken and announced.
      await sql`SELECT ledgerflow.queue_release(${HOLDER}::uuid, 'work', false)`.execute(store.db);
      await sentinel('after-release');
      expect(heard).toEqual(['after-own-grants', WAITER, 'after-release']);
    } finally {
      await listener.end();
    }
  });
});
