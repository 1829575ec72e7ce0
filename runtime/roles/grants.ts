/**
 * The least-privilege roles of a ledgerflow database and the GRANTs that make them
 * (docs/operations/roles.md, DESIGN.md "Immutable records and roles"):
 *
 *   owner      runs `ledgerflow migrate`: owns the ledgerflow schema and every table in it (DDL).
 *   worker     workers, clients (start, send-event, cancel) and operator actions: the DML the
 *              runtime issues, per table, and nothing else — no DDL, no DELETE of run state, no
 *              write to the archive or to the list of retention roles.
 *   reader     `runs`, `run`, `effects`, `versions`, `audit`, the dashboard's pages: SELECT only.
 *   retention  `ledgerflow prune` (or a worker given `retention`): deletes finished runs, old
 *              events and archive tombstones; listed in ledgerflow.retention_role, which is what lets the
 *              immutability triggers of core 0012 pass its deletes of recorded history.
 *
 * The statements are generated here from {@link TABLE_PRIVILEGES}, one entry per table of
 * `LedgerflowDatabase`, so a new core table does not compile until someone decides who may write
 * it. They are to be run by the owner (or a superuser), in one transaction, after every migrate
 * that adds a table; re-running them is harmless (they revoke first).
 */
import type { LedgerflowDatabase } from '../store/tables.js';

export type TablePrivilege = 'SELECT' | 'INSERT' | 'UPDATE' | 'DELETE';

/** What the worker and the retention role may do to one table, besides SELECT (every role reads every table). */
export interface TableGrants {
  readonly worker: readonly TablePrivilege[];
  readonly retention: readonly TablePrivilege[];
}

/**
 * Per table, beyond SELECT. The worker's list is exactly what runtime/worker, runtime/client and
 * runtime/reconciler write (`grep` their statements); the retention role's is what
 * runtime/retention/ writes (UPDATE where it only locks rows `FOR UPDATE`: PostgreSQL asks
 * for it; the immutability triggers refuse actual updates of the archive).
 */
export const TABLE_PRIVILEGES: Readonly<Record<keyof LedgerflowDatabase, TableGrants>> = {
  'ledgerflow.schema_migration': { worker: [], retention: [] },
  'ledgerflow.workflow_version': { worker: [], retention: [] },
  'ledgerflow.workflow_step_def': { worker: [], retention: [] },
  // A worker registers the definition it serves (first wins) and re-registers a draft's (core 0020).
  'ledgerflow.workflow_fingerprint': { worker: ['INSERT', 'UPDATE'], retention: [] },
  // FOR KEY SHARE / FOR NO KEY UPDATE locks need UPDATE too; runs are deleted only by pruning.
  'ledgerflow.workflow_run': { worker: ['INSERT', 'UPDATE'], retention: ['UPDATE', 'DELETE'] },
  'ledgerflow.step_attempt': { worker: ['INSERT', 'UPDATE'], retention: [] },
  'ledgerflow.step_effect': { worker: ['INSERT', 'UPDATE'], retention: [] },
  'ledgerflow.step_result': { worker: ['INSERT'], retention: [] },
  'ledgerflow.step_wait': { worker: ['INSERT', 'UPDATE'], retention: [] },
  // Events are deleted only by pruning (core 0016), which locks them FOR UPDATE first.
  'ledgerflow.event': { worker: ['INSERT', 'UPDATE'], retention: ['UPDATE', 'DELETE'] },
  'ledgerflow.schedule': { worker: ['INSERT', 'UPDATE'], retention: [] },
  'ledgerflow.queue': { worker: ['INSERT', 'UPDATE'], retention: [] },
  'ledgerflow.queue_partition': { worker: ['INSERT', 'UPDATE'], retention: [] },
  'ledgerflow.queue_grant': { worker: ['INSERT', 'UPDATE', 'DELETE'], retention: [] },
  'ledgerflow.queue_slot': { worker: ['INSERT', 'UPDATE', 'DELETE'], retention: [] },
  'ledgerflow.queue_waiter': { worker: ['INSERT', 'UPDATE', 'DELETE'], retention: [] },
  'ledgerflow.operator_action': { worker: ['INSERT'], retention: [] },
  'ledgerflow.run_archive': { worker: [], retention: ['INSERT', 'UPDATE', 'DELETE'] },
  'ledgerflow.effect_archive': { worker: [], retention: ['INSERT'] },
  'ledgerflow.event_archive': { worker: [], retention: ['INSERT', 'UPDATE', 'DELETE'] },
  'ledgerflow.retention_role': { worker: [], retention: [] },
  // Set by the owner (`ledgerflow limits set`); everyone reads it.
  'ledgerflow.payload_limits': { worker: [], retention: [] },
};

export interface GrantRoles {
  /** The role that runs `ledgerflow migrate` and owns the schema; the statements are run as it. */
  readonly owner: string;
  readonly worker: string;
  readonly reader: string;
  /** The role that prunes; omitted: nobody but the roles already listed in ledgerflow.retention_role. */
  readonly retention?: string;
}

/** Problems with the role names, each a sentence saying what to fix; empty when they are usable. */
export function grantRoleProblems(roles: GrantRoles): string[] {
  const problems: string[] = [];
  for (const [what, name] of Object.entries(roles) as [keyof GrantRoles, string | undefined][]) {
    if (name === undefined) continue;
    if (name.length === 0 || Buffer.byteLength(name) > 63) {
      problems.push(`--${what} must name a role (1 to 63 bytes), got "${name}".`);
    } else if (name.toLowerCase() === 'public' || name.startsWith('pg_')) {
      problems.push(`--${what} "${name}" is reserved by PostgreSQL; name a role of your own.`);
    }
  }
  if (roles.owner === roles.worker || roles.owner === roles.reader) {
    problems.push(
      '--owner must differ from --worker and --reader: the owner can change any table (and drop the triggers).',
    );
  }
  if (roles.retention === roles.owner) {
    problems.push(
      '--retention must differ from --owner: the owner is listed already (core 0012), and these statements revoke first.',
    );
  }
  if (roles.reader === roles.worker || roles.reader === roles.retention) {
    problems.push('--reader must differ from --worker and --retention: the reader is read-only.');
  }
  return problems;
}

/** `name` as a quoted identifier, exactly as given (no case folding). */
function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

function literal(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/**
 * The SQL that gives each role its privileges, as one transaction. Throws a TypeError when
 * {@link grantRoleProblems} finds any (the CLI reports those first).
 *
 * @example
 * const sql = grantStatements({ owner: 'app_owner', worker: 'app_worker', reader: 'app_reader', retention: 'app_pruner' });
 * await pool.query(sql); // connected as app_owner
 */
export function grantStatements(roles: GrantRoles): string {
  const problems = grantRoleProblems(roles);
  if (problems.length > 0) throw new TypeError(problems.join(' '));
  const owner = ident(roles.owner);
  const worker = ident(roles.worker);
  const reader = ident(roles.reader);
  const retention = roles.retention === undefined ? undefined : ident(roles.retention);
  const grantees = [worker, reader, ...(retention !== undefined && retention !== worker ? [retention] : [])];
  const tables = Object.keys(TABLE_PRIVILEGES).sort() as (keyof LedgerflowDatabase)[];
  const lines: string[] = [
    `-- ledgerflow grants: owner ${roles.owner}, worker ${roles.worker}, reader ${roles.reader}` +
      (roles.retention !== undefined ? `, retention ${roles.retention}` : ''),
    `-- Run as ${roles.owner} (the role that ran \`ledgerflow migrate\`), again after every migrate.`,
    'BEGIN;',
    '',
    '-- Start from nothing, so that running this again takes back what is no longer granted.',
    `REVOKE ALL ON ALL TABLES IN SCHEMA ledgerflow FROM ${grantees.join(', ')};`,
    `REVOKE ALL ON ALL SEQUENCES IN SCHEMA ledgerflow FROM ${grantees.join(', ')};`,
    `REVOKE CREATE ON SCHEMA ledgerflow FROM ${grantees.join(', ')};`,
    `GRANT USAGE ON SCHEMA ledgerflow TO ${grantees.join(', ')};`,
    '',
    '-- Everyone reads everything (the immutability triggers read ledgerflow.retention_role).',
    `GRANT SELECT ON ALL TABLES IN SCHEMA ledgerflow TO ${grantees.join(', ')};`,
    '',
    `-- The worker: the DML the runtime issues, per table.`,
  ];
  for (const table of tables) {
    const privileges = TABLE_PRIVILEGES[table].worker;
    if (privileges.length > 0) lines.push(`GRANT ${privileges.join(', ')} ON ${table} TO ${worker};`);
  }
  lines.push(`GRANT USAGE ON ALL SEQUENCES IN SCHEMA ledgerflow TO ${worker};`);
  if (retention !== undefined && roles.retention !== undefined) {
    lines.push('', '-- The retention role: prune finished runs, old events and expired tombstones.');
    for (const table of tables) {
      const privileges = TABLE_PRIVILEGES[table].retention;
      if (privileges.length > 0) lines.push(`GRANT ${privileges.join(', ')} ON ${table} TO ${retention};`);
    }
    lines.push(
      '-- Listed, its deletes of recorded history pass the triggers of core 0012.',
      `INSERT INTO ledgerflow.retention_role (role_name) VALUES (${literal(roles.retention)}) ON CONFLICT DO NOTHING;`,
    );
  }
  lines.push(
    '',
    `-- Tables a later migration creates (as ${roles.owner}): readable by all; the worker's exact`,
    '-- privileges on them come with the next run of these statements.',
    `ALTER DEFAULT PRIVILEGES FOR ROLE ${owner} IN SCHEMA ledgerflow GRANT SELECT ON TABLES TO ${grantees.join(', ')};`,
    `ALTER DEFAULT PRIVILEGES FOR ROLE ${owner} IN SCHEMA ledgerflow GRANT USAGE ON SEQUENCES TO ${worker};`,
    '',
    'COMMIT;',
  );
  return `${lines.join('\n')}\n`;
}
