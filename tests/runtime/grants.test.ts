import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { grantRoleProblems, grantStatements } from '../../runtime/roles/grants.js';
import { runCli } from '../support/run-cli.js';

const ROLES = { owner: 'app_owner', worker: 'app_worker', reader: 'app_reader', retention: 'app_pruner' };

describe('ledgerflow grants', () => {
  it('grants the worker per-table DML without DELETE of run state or archive writes, and lists the retention role', () => {
    const text = grantStatements(ROLES);
    expect(
      text.startsWith(
        '-- ledgerflow grants: owner app_owner, worker app_worker, reader app_reader, retention app_pruner\n',
      ),
    ).toBe(true);
    expect(text).toContain(
      'REVOKE ALL ON ALL TABLES IN SCHEMA ledgerflow FROM "app_worker", "app_reader", "app_pruner";',
    );
    expect(text).toContain(
      'GRANT SELECT ON ALL TABLES IN SCHEMA ledgerflow TO "app_worker", "app_reader", "app_pruner";',
    );
    expect(text).toContain('GRANT INSERT, UPDATE ON ledgerflow.step_effect TO "app_worker";');
    expect(text).toContain('GRANT INSERT ON ledgerflow.step_result TO "app_worker";');
    expect(text).toContain('GRANT UPDATE, DELETE ON ledgerflow.workflow_run TO "app_pruner";');
    expect(text).toContain(
      `INSERT INTO ledgerflow.retention_role (role_name) VALUES ('app_pruner') ON CONFLICT DO NOTHING;`,
    );
    expect(text).toContain(
      'ALTER DEFAULT PRIVILEGES FOR ROLE "app_owner" IN SCHEMA ledgerflow GRANT SELECT ON TABLES TO "app_worker", "app_reader", "app_pruner";',
    );
    expect(text).not.toMatch(
      /DELETE ON ledgerflow\.(workflow_run|step_effect|step_result|step_attempt|run_archive|effect_archive) TO "app_worker"/,
    );
    expect(text).not.toMatch(
      /ON ledgerflow\.(run_archive|effect_archive|retention_role|schema_migration|workflow_version) TO "app_worker"/,
    );
    expect(text.trimEnd().endsWith('COMMIT;')).toBe(true);
  });

  it('prints tests/runtime/fixtures/grants.sql for the documented roles (docs/operations/roles.md quotes it)', () => {
    const golden = readFileSync(new URL('./fixtures/grants.sql', import.meta.url), 'utf8');
    expect(
      grantStatements(ROLES),
      'regenerate: npx ledgerflow grants --owner app_owner --worker app_worker --reader app_reader --retention app_pruner > tests/runtime/fixtures/grants.sql',
    ).toBe(golden);
  });

  it('quotes role names exactly as given and leaves out the retention part without --retention', () => {
    const text = grantStatements({ owner: 'Owner', worker: 'w"x', reader: "o'r" });
    expect(text).toContain('GRANT USAGE ON SCHEMA ledgerflow TO "w""x", "o\'r";');
    expect(text).not.toContain('retention_role (role_name)');
    expect(text).toContain('FOR ROLE "Owner"');
  });

  it('refuses roles that would defeat the point, saying which', () => {
    expect(grantRoleProblems({ owner: 'a', worker: 'a', reader: 'r' })).toEqual([
      '--owner must differ from --worker and --reader: the owner can change any table (and drop the triggers).',
    ]);
    expect(grantRoleProblems({ owner: 'o', worker: 'w', reader: 'r', retention: 'o' })).toEqual([
      '--retention must differ from --owner: the owner is listed already (core 0012), and these statements revoke first.',
    ]);
    expect(grantRoleProblems({ owner: 'o', worker: 'w', reader: 'w' })).toEqual([
      '--reader must differ from --worker and --retention: the reader is read-only.',
    ]);
    expect(grantRoleProblems({ owner: 'o', worker: 'pg_monitor', reader: '' })).toEqual([
      '--worker "pg_monitor" is reserved by PostgreSQL; name a role of your own.',
      '--reader must name a role (1 to 63 bytes), got "".',
    ]);
    expect(() => grantStatements({ owner: 'a', worker: 'a', reader: 'r' })).toThrow(TypeError);
  });

  it('prints them from the CLI, reading no database; a missing or bad role is a usage error', async () => {
    const printed = await runCli([
      'grants',
      '--owner',
      'app_owner',
      '--worker',
      'app_worker',
      '--reader',
      'app_reader',
      '--retention',
      'app_pruner',
    ]);
    expect(printed).toEqual({ code: 0, stdout: grantStatements(ROLES), stderr: '' });
    const json = await runCli([
      'grants',
      '--owner',
      'app_owner',
      '--worker',
      'app_worker',
      '--reader',
      'app_reader',
      '--json',
    ]);
    expect(JSON.parse(json.stdout)).toEqual({
      roles: { owner: 'app_owner', worker: 'app_worker', reader: 'app_reader' },
      sql: grantStatements({ owner: 'app_owner', worker: 'app_worker', reader: 'app_reader' }),
    });
    const missing = await runCli(['grants', '--owner', 'o']);
    expect(missing).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'ledgerflow grants: missing --worker <role>, --reader <role>.\nRun `ledgerflow grants --help` for usage.\n',
    });
    const same = await runCli(['grants', '--owner', 'o', '--worker', 'o', '--reader', 'r']);
    expect(same.code).toBe(2);
    expect(same.stderr).toContain('--owner must differ from --worker and --reader');
  });
});
