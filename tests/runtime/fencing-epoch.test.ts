import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { sql } from 'kysely';
import { beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../runtime/client/client.js';
import { insertRunStatement } from '../../runtime/client/insert-run.js';
import { claimRuns } from '../../runtime/worker/claim.js';
import { buildRegistry } from '../../runtime/worker/registry.js';
import { describeStores } from '../support/describe-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { gatedHandlers } from './fixtures/test-handlers.js';
import { gated } from './fixtures/test-workflows.js';

/**
 * Fencing tokens above the timeline's floor (core 0023): a token issued on WAL timeline T is at
 * least (T - 1) * 2^32, so a promotion, which starts a higher timeline, never hands out a token
 * that a worker of the old one may still hold (tests/failover/fencing-across-promotion.test.ts
 * shows it with real servers). Here the timeline is the one function a test database can replace.
 */
const FLOOR_3 = 2 * 2 ** 32;

describeStores('fencing tokens above the timeline floor', (getStore) => {
  const registry = buildRegistry([gatedHandlers('epoch')]);
  const claimOptions = { workerId: 'epoch-worker', leaseMs: 60_000, limit: 1 };
  const tokenOf = async (runId: string): Promise<number> =>
    (
      await getStore()
        .db.selectFrom('ledgerflow.workflow_run')
        .select('fencing_token')
        .where('id', '=', runId)
        .executeTakeFirstOrThrow()
    ).fencing_token;

  beforeAll(() => migrateForTest(getStore(), [gated]));

  it('reads timeline 1 on a server that never failed over: tokens are 1, 2, 3 …', async () => {
    const { rows } = await sql<{ timeline: number; next: number }>`
      SELECT ledgerflow.wal_timeline() AS timeline, ledgerflow.next_fencing_token(41) AS next`.execute(getStore().db);
    expect(rows[0]).toEqual({ timeline: 1, next: 42 });
  });

  it('moves tokens on with no function of its own: the settle cascade calls next_fencing_token', async () => {
    const { rows } = await sql<{ name: string }>`
      SELECT p.proname AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname = 'ledgerflow' AND p.prosrc ~ 'fencing_token\\s*\\+\\s*1'`.execute(getStore().db);
    expect(rows).toEqual([]);
  });

  it('issues every token at or above the floor of timeline 3 once the server is on it', async () => {
    const db = getStore().db;
    // As on a server promoted twice. This block's database is its own, and this is its last test.
    await sql`CREATE OR REPLACE FUNCTION ledgerflow.wal_timeline() RETURNS bigint LANGUAGE sql AS $$ SELECT 3::bigint $$`.execute(
      db,
    );
    const { rows } = await sql<{ next: number[] }>`
      SELECT ARRAY[ledgerflow.next_fencing_token(0), ledgerflow.next_fencing_token(41),
                   ledgerflow.next_fencing_token(${FLOOR_3 - 1}), ledgerflow.next_fencing_token(${FLOOR_3 + 6})] AS next`.execute(
      db,
    );
    expect(rows[0]?.next.map(Number)).toEqual([FLOOR_3, FLOOR_3, FLOOR_3, FLOOR_3 + 7]);

    const client = createClient({ store: getStore() });
    const { runId } = await client.start(gated, { label: 'floor' });
    const [claimed] = await claimRuns(db, registry, claimOptions);
    expect(claimed).toMatchObject({ id: runId, fencingToken: FLOOR_3 });
    // A take-over of the expired lease moves it on by one, above the floor.
    await db
      .updateTable('ledgerflow.workflow_run')
      .set({ lease_expires_at: sql`statement_timestamp() - interval '1 second'` })
      .where('id', '=', runId)
      .execute();
    const [taken] = await claimRuns(db, registry, claimOptions);
    expect(taken).toMatchObject({ id: runId, fencingToken: FLOOR_3 + 1, tookOver: true });
    expect(await client.cancel(runId)).toBe(true);
    expect(await tokenOf(runId)).toBe(FLOOR_3 + 2);
    await client.retryRun(runId, { actor: 'test', reason: 'floor' });
    expect(await tokenOf(runId)).toBe(FLOOR_3 + 3);

    // A start claimed for a worker of its process issues its first token like a claim.
    const inserted = await insertRunStatement(
      {
        id: '00000000-0000-4000-8000-00000000e0c3',
        workflow_name: gated.name,
        workflow_version: gated.version,
        input: '{"label":"x"}',
      },
      { guarded: false, notify: false, claimedBy: { workerId: 'epoch-worker', leaseMs: 60_000, step: 'wait' } },
    ).execute(db);
    expect(inserted.rows.map((r) => Number(r.fencing_token))).toEqual([FLOOR_3]);
  });
});

describe('token writes', () => {
  it('go through ledgerflow.next_fencing_token in every runtime statement', () => {
    const files = (dir: string): string[] =>
      readdirSync(dir).flatMap((name) => {
        const path = join(dir, name);
        return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
      });
    const bumps = files('runtime')
      .flatMap((file) =>
        readFileSync(file, 'utf8')
          .split('\n')
          .map((line, i) => ({ where: `${file}:${i + 1}`, line })),
      )
      .filter(
        ({ line }) => /fencing_token\s*[=:]\s*[^,]*fencing_token\s*\+\s*1/.test(line) && !/^\s*(\*|\/\/)/.test(line),
      )
      .map(({ where }) => where);
    expect(bumps).toEqual([]);
  });
});
