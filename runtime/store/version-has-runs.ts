import { sql, type RawBuilder } from 'kysely';

/**
 * Whether a workflow version has runs, finished and pruned ones included (`run_archive` keeps a
 * pruned run's identity): what makes a draft version no longer free to change (core 0020; its
 * trigger asks the same in PL/pgSQL). `alias` names the row holding `workflow_name` and `version`.
 */
export function versionHasRuns(alias: string): RawBuilder<boolean> {
  const name = sql.ref(`${alias}.workflow_name`);
  const version = sql.ref(`${alias}.version`);
  return sql<boolean>`(EXISTS (SELECT 1 FROM ledgerflow.workflow_run r WHERE r.workflow_name = ${name} AND r.workflow_version = ${version})
     OR EXISTS (SELECT 1 FROM ledgerflow.run_archive a WHERE a.workflow_name = ${name} AND a.workflow_version = ${version}))`;
}
