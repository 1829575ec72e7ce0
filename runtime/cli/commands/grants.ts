import { grantRoleProblems, grantStatements, type GrantRoles } from '../../roles/grants.js';
import { defineCommand, UsageError } from '../command.js';
import { toJsonDocument } from '../../presentation/format-values.js';

export const grantsCommand = defineCommand({
  name: 'grants',
  summary: 'print the GRANTs for least-privilege owner, worker, reader and retention roles',
  usage: '--owner <role> --worker <role> --reader <role> [--retention <role>] [options]',
  description:
    'Prints the SQL that gives each role what it needs and no more, as one transaction, to run as the owner\n' +
    '(the role that runs `ledgerflow migrate`) after every migrate. The worker gets the DML the runtime issues\n' +
    '(no DDL, no deletes of run state, no archive writes); the reader SELECT only; the retention role what\n' +
    '`ledgerflow prune` needs, and a row in ledgerflow.retention_role so that its deletes of recorded history\n' +
    'pass the immutability triggers. The roles must exist (CREATE ROLE is yours: it needs CREATEROLE).\n' +
    'Reads no database.',
  options: {
    owner: { type: 'string' },
    worker: { type: 'string' },
    reader: { type: 'string' },
    retention: { type: 'string' },
  },
  optionsHelp: `  --owner <role>         owns the ledgerflow schema (runs migrate)
  --worker <role>        workers, clients and operator actions
  --reader <role>        runs, run, effects and the dashboard's pages: read-only
  --retention <role>     prunes (may be the worker's role, if workers prune)`,
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, json, io }) {
    const missing = (['owner', 'worker', 'reader'] as const).filter((name) => values[name] === undefined);
    if (missing.length > 0) throw new UsageError(`missing ${missing.map((name) => `--${name} <role>`).join(', ')}.`);
    const roles: GrantRoles = {
      owner: values.owner!,
      worker: values.worker!,
      reader: values.reader!,
      ...(values.retention !== undefined ? { retention: values.retention } : {}),
    };
    const problems = grantRoleProblems(roles);
    if (problems.length > 0) throw new UsageError(problems.join(' '));
    const statements = grantStatements(roles);
    io.out(json ? toJsonDocument({ roles, sql: statements }) : statements);
    return 0;
  },
});
