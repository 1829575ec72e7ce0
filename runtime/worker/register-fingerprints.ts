import { sql, type Kysely } from 'kysely';
import { MigrationError } from '../errors.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { versionHasRuns } from '../store/version-has-runs.js';
import type { WorkflowRegistry } from './registry.js';
import { describeChanges, fingerprintOf } from '../contracts/workflow-fingerprint.js';

/*
 * The worker's check of the definitions it serves against the ones the database registered
 * ({@link registerFingerprints}), once, at start. No state of its own.
 */

interface RegisteredRow {
  workflow_name: string;
  version: number;
  fingerprint: string;
  parts: Record<string, string>;
  registered_by: string;
  registered_at: Date | string;
  draft: boolean;
  has_runs: boolean;
}

/**
 * Registers the fingerprint of every version the worker serves (contracts/workflow-fingerprint.ts)
 * and refuses to start when one differs from the fingerprint the database registered for that
 * version: first registration wins, and a registration changes only for a draft version without
 * runs (the `workflow_fingerprint` trigger of core 0020 holds every writer to that). Called after
 * `verifyMigrated`, so every version has its `workflow_version` row.
 *
 * @returns the versions whose draft registration this call replaced (`name@version`).
 */
export async function registerFingerprints(
  db: Kysely<LedgerflowDatabase>,
  registry: WorkflowRegistry,
  workerId: string,
): Promise<string[]> {
  if (registry.all.length === 0) return [];
  const live = new Map(registry.all.map((w) => [`${w.name}@${w.version}`, fingerprintOf(w.registration.workflow)]));
  const names = registry.all.map((w) => w.name);
  const versions = registry.all.map((w) => w.version);
  const fingerprints = registry.all.map((w) => live.get(`${w.name}@${w.version}`)!.hash);
  const parts = registry.all.map((w) => JSON.stringify(live.get(`${w.name}@${w.version}`)!.parts));
  await sql`
    INSERT INTO ledgerflow.workflow_fingerprint (workflow_name, version, fingerprint, parts, registered_by)
    SELECT n, v, f, p::jsonb, ${workerId}
      FROM unnest(${names}::text[], ${versions}::int[], ${fingerprints}::text[], ${parts}::text[]) AS t(n, v, f, p)
    ON CONFLICT (workflow_name, version) DO NOTHING`.execute(db);
  const rows = (
    await sql<RegisteredRow>`
      SELECT f.workflow_name, f.version, f.fingerprint, f.parts, f.registered_by, f.registered_at,
             v.draft_migration IS NOT NULL AS draft, ${versionHasRuns('v')} AS has_runs
        FROM ledgerflow.workflow_fingerprint f
        JOIN ledgerflow.workflow_version v ON v.workflow_name = f.workflow_name AND v.version = f.version
       WHERE (f.workflow_name, f.version) IN (SELECT * FROM unnest(${names}::text[], ${versions}::int[]))`.execute(db)
  ).rows;
  const problems: string[] = [];
  const replaced: string[] = [];
  for (const row of rows) {
    const id = `${row.workflow_name}@${row.version}`;
    const mine = live.get(id)!;
    if (row.fingerprint === mine.hash) continue;
    if (row.draft && !row.has_runs) {
      // A draft may change until it runs; the trigger refuses this if a run appeared meanwhile.
      await db
        .updateTable('ledgerflow.workflow_fingerprint')
        .set({
          fingerprint: mine.hash,
          parts: JSON.stringify(mine.parts),
          registered_by: workerId,
          registered_at: sql`now()`,
        })
        .where('workflow_name', '=', row.workflow_name)
        .where('version', '=', row.version)
        .execute();
      replaced.push(id);
      continue;
    }
    problems.push(describeDrift(row, mine.parts));
  }
  if (problems.length > 0) {
    throw new MigrationError(
      `Cannot start the worker: its definitions differ from what this database registered.\n${problems.join('\n')}`,
    );
  }
  return replaced;
}

function describeDrift(row: RegisteredRow, live: Readonly<Record<string, string>>): string {
  const registered = typeof row.parts === 'string' ? (JSON.parse(row.parts) as Record<string, string>) : row.parts;
  const parts = describeChanges(registered, live);
  const at = row.registered_at instanceof Date ? row.registered_at.toISOString() : String(row.registered_at);
  const fix = row.draft
    ? 'It is a draft, but it has runs in this database, so it can no longer change: declare the change as a new version ' +
      '(bump `version`, run `ledgerflow codegen` and `ledgerflow migrate`) or restore the definition that ran.'
    : 'A released version never changes: declare the change as a new version (bump `version`, run `ledgerflow codegen` ' +
      'and `ledgerflow migrate`, keep the old version declared until its runs finish) or restore the definition that ran.';
  return (
    `  workflow "${row.workflow_name}" v${row.version}: changed since it was registered (by ${row.registered_by} at ${at}): ` +
    `${parts.join('; ')}. ${fix}`
  );
}
