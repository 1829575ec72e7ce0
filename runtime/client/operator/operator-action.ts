import { sql, type Kysely, type RawBuilder } from 'kysely';
import { z } from 'zod';
import { checkOptions, rule } from '../../../dsl/option-checks.js';
import { ValidationError } from '../../errors.js';
import { missingRunError } from '../../retention/missing-run-error.js';
import type {
  CompensationReason,
  Json,
  LedgerflowDatabase,
  OperatorActionKind,
  RunStatus,
} from '../../store/tables.js';

/*
 * Operator actions: what a person does to a run, an effect, a queue or a schedule when the
 * runtime cannot decide alone — retry a failed or cancelled run, say whether an effect whose
 * outcome is unknown happened, pause a queue. Each is ONE transaction that locks what it acts on,
 * refuses (ConflictError, nothing written) anything that is not in a state it may act on, reuses
 * the fenced statements of the worker and the reconciler, and writes its audit row
 * (`ledgerflow.operator_action`: who, when, why) in that same transaction — an action that is
 * refused or changes nothing leaves no row.
 *
 * What every action shares is here: the note (who and why) and its check, the audit row, and the
 * lock of the run a run's action takes first. One file per action beside it: cancel.ts, retry.ts,
 * resolve.ts, pause.ts, audit.ts (the trail read back).
 */

/** Who acts and why; both required for an audited action. */
export interface OperatorNote {
  /** Who: a user name, an email. 1 to 200 characters. */
  readonly actor: string;
  /** Why: shown in the audit trail. 1 to 2 000 characters. */
  readonly reason: string;
}

const MAX_ACTOR_LENGTH = 200;
const MAX_REASON_LENGTH = 2_000;

/** A note's text: something said (not blank), and not a book. */
function noteText(max: number) {
  return rule(z.string(), 'must be a non-empty string')
    .refine((text) => text.trim() !== '', { error: 'must be a non-empty string (got a blank one)', abort: true })
    .refine((text) => text.length <= max, {
      error: (issue) => `at most ${max} characters (got ${(issue.input as string).length})`,
    });
}

const operatorNoteSchema = z.object({ actor: noteText(MAX_ACTOR_LENGTH), reason: noteText(MAX_REASON_LENGTH) });

/** Checks a note (ValidationError, nothing written); `undefined` passes when the action may go unaudited. */
export function checkNote(note: OperatorNote | undefined, required: boolean): OperatorNote | undefined {
  if (note === undefined) {
    if (!required) return undefined;
    throw new ValidationError(
      'This action needs a note: { actor, reason } — who does it and why (kept in the audit trail).',
      ['note: required'],
    );
  }
  checkOptions(
    operatorNoteSchema,
    note,
    (issues) =>
      new ValidationError(
        `Invalid operator note:\n${issues.map((i) => `  - ${i}`).join('\n')}\nNothing was done.`,
        issues,
      ),
    { separator: ': ', show: JSON.stringify },
  );
  return note;
}

interface AuditEntry {
  readonly action: OperatorActionKind;
  readonly runId: string | null;
  readonly target: string | null;
  readonly detail: Json;
}

/** The audit row of an action, inserted by the action's own transaction. */
export function auditStatement(note: OperatorNote, entry: AuditEntry): RawBuilder<unknown> {
  return sql`
    INSERT INTO ledgerflow.operator_action (actor, action, run_id, target, reason, detail)
    VALUES (${note.actor}, ${entry.action}, ${entry.runId}::uuid, ${entry.target}, ${note.reason}, ${JSON.stringify(entry.detail)}::jsonb)`;
}

/** Writes the audit row of an action in its transaction, when it has a note. */
export async function audit(
  trx: Kysely<LedgerflowDatabase>,
  note: OperatorNote | undefined,
  entry: AuditEntry,
): Promise<void> {
  if (note !== undefined) await auditStatement(note, entry).execute(trx);
}

/** The run row an action locks first (`FOR NO KEY UPDATE`: waits for a commit in progress). */
export interface LockedRun {
  id: string;
  workflow_name: string;
  workflow_version: number;
  status: RunStatus;
  current_step: number;
  parent_run_id: string | null;
  leased: boolean;
  deadline_at: Date | null;
  step_name: string | null;
  compensation: CompensationReason | null;
}

export async function lockRun(trx: Kysely<LedgerflowDatabase>, runId: string): Promise<LockedRun> {
  const { rows } = await sql<LockedRun>`
    SELECT r.id, r.workflow_name, r.workflow_version, r.status, r.current_step, r.parent_run_id,
           COALESCE(r.status = 'running' AND r.lease_expires_at > statement_timestamp(), false) AS leased,
           r.deadline_at, d.step_name, r.compensation
      FROM ledgerflow.workflow_run r
      LEFT JOIN ledgerflow.workflow_step_def d
        ON d.workflow_name = r.workflow_name AND d.version = r.workflow_version AND d.position = r.current_step
     WHERE r.id = ${runId}
       FOR NO KEY UPDATE OF r`.execute(trx);
  const run = rows[0];
  if (run === undefined) throw await missingRunError(trx, runId, '; nothing was done');
  return run;
}
