import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../runtime/store/open-store.js';
import { runCli as run } from '../support/run-cli.js';
import { createPgTestStore, type TestStore } from '../support/test-stores.js';

const STACK_LINE = /^\s+at /m;

/** `--database-url` / DATABASE_URL with a host list (libpq's multi-host form, see runtime/store/pg/postgres-url.ts). */
describe('ledgerflow CLI on a multi-host database URL', () => {
  let store: TestStore;
  let multiHostUrl: string;

  beforeAll(async () => {
    store = await createPgTestStore();
    const url = new URL(store.url!);
    // Port 1 is down: the CLI must go on to the host that accepts writes.
    multiHostUrl = `postgres://postgres@127.0.0.1:1,${url.host}${url.pathname}?target_session_attrs=read-write`;
  });
  afterAll(async () => {
    await store?.close();
  });

  it('uses the host that accepts writes', async () => {
    const outcome = await run(['runs', '--json', '--database-url', multiHostUrl]);
    expect(outcome.stderr).toBe('');
    expect(outcome.code).toBe(0);
    expect(JSON.parse(outcome.stdout)).toEqual([]);
  });

  it('openStore takes the same URL', async () => {
    const opened = await openStore({ databaseUrl: multiHostUrl });
    try {
      expect(opened.location).toContain(`127.0.0.1:1,`);
      expect(await opened.db.selectFrom('ledgerflow.workflow_run').select('id').execute()).toEqual([]);
    } finally {
      await opened.close();
    }
  });

  it('refuses a malformed host list with a usage error saying what to fix', async () => {
    const outcome = await run(['runs', '--database-url', 'postgres://db1:5432,,db2:5432/app']);
    expect(outcome.code).toBe(2);
    expect(outcome.stderr).toContain(
      'Host 2 of 3 in the database URL has no host name; write host:port (hosts separated by commas)',
    );
    const attrs = await run(['runs', '--database-url', 'postgres://db1,db2/app?target_session_attrs=standby']);
    expect(attrs.code).toBe(2);
    expect(attrs.stderr).toContain('target_session_attrs=standby is not supported');
  });

  it('reports that no host accepts writes, naming each, without a stack trace', async () => {
    const outcome = await run(['runs', '--database-url', 'postgres://nobody@127.0.0.1:1,127.0.0.1:2/none']);
    expect(outcome.code).toBe(1);
    expect(outcome.stderr).toMatch(
      /^ledgerflow runs: cannot use the database: No host accepts writes .*127\.0\.0\.1:1 did not answer.*127\.0\.0\.1:2 did not answer.*Check --database-url/,
    );
    expect(outcome.stderr).not.toMatch(STACK_LINE);
  });
});
