import { sql, type Kysely, type RawBuilder } from 'kysely';
import {
  RUN_STATUSES,
  type CompensationReason,
  type Json,
  type LedgerflowDatabase,
  type RunStatus,
  type WorkflowRunRow,
} from '../store/tables.js';

/**
 * The one query that lists runs, newest first: the dashboard's runs page (`loadRunPage`, with the
 * counts per status) and `client.listRuns` (`listRunRows`, so `ledgerflow runs`) both read it, the
 * first a page of summary columns and a cursor, the second whole rows. Every page is keyset-paged — never OFFSET — and reads index ranges in
 * order (core 0010): without a key search, one range per status, or per (workflow, version,
 * status), each read newest first and stopped after a page, then merged (usually by Merge Append,
 * which reads about a page plus a row per range) — at most `(limit + 1) × ranges` index entries
 * whatever the number of runs; with a key search, one range of the dedupe-key index in byte order. `tests/dashboard/run-list-plan.test.ts` checks those plans over a million runs.
 */

export interface RunListFilter {
  /** Empty: every status. */
  readonly statuses: readonly RunStatus[];
  readonly workflow?: string;
  /** Only with `workflow`. */
  readonly version?: number;
  /** Only the children of this run: one range of its children, sorted (they are few next to all runs). */
  readonly parentRunId?: string;
  /** Created at or after. */
  readonly createdFrom?: Date;
  /** Created before. */
  readonly createdBefore?: Date;
  /** The dedupe key, equal to `value` or starting with it. */
  readonly dedupeKey?: { readonly value: string; readonly match: 'exact' | 'prefix' };
}

/** Where the next page starts: after this run, in the list's order. */
export type RunCursor =
  /** Newest first: created_at (microseconds, as PostgreSQL prints them in UTC) and id. */
  | { readonly by: 'created'; readonly createdAt: string; readonly id: string }
  /** A key search, in key order. */
  | { readonly by: 'key'; readonly dedupeKey: string; readonly id: string };

export interface RunListRow {
  readonly id: string;
  readonly workflow_name: string;
  readonly workflow_version: number;
  readonly status: RunStatus;
  /** Why the run compensates (or did), core 0013; NULL for a run that never did. */
  readonly compensation: CompensationReason | null;
  readonly dedupe_key: string | null;
  readonly current_step: number;
  readonly parent_run_id: string | null;
  readonly error: Json | null;
  readonly created_at: Date;
  readonly finished_at: Date | null;
  /** created_at to the microsecond (a Date keeps milliseconds), for the cursor. */
  readonly created_key: string;
}

export interface RunPage<Row = RunListRow> {
  readonly rows: readonly Row[];
  /** The next page's cursor, or undefined on the last page. */
  readonly next: RunCursor | undefined;
}

/** Counts per status stop here: "10 000+" costs 10 001 index entries per status, never the table. */
export const STATUS_COUNT_CAP = 10_000;

/** A run as `client.listRuns` returns it, with the cursor's key (dropped before it is returned). */
export type WholeRunListRow = WorkflowRunRow & { readonly created_key: string };

/** What a list reads of each run: the dashboard's columns ({@link RunListRow}), or every column. */
export type RunListColumns = 'summary' | 'all';
interface RowOf {
  summary: RunListRow;
  all: WholeRunListRow;
}

const CREATED_KEY = sql`to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_key`;
const COLUMNS: Readonly<Record<RunListColumns, RawBuilder<unknown>>> = {
  summary: sql`id, workflow_name, workflow_version, status, compensation, dedupe_key, current_step, parent_run_id, error, created_at, finished_at,
  ${CREATED_KEY}`,
  all: sql`*, ${CREATED_KEY}`,
};

/** The versions of a workflow that have runs to list (migrated versions); a run's version always has a row. */
export async function workflowVersions(db: Kysely<LedgerflowDatabase>, workflow: string): Promise<number[]> {
  const rows = await db
    .selectFrom('ledgerflow.workflow_version')
    .select('version')
    .where('workflow_name', '=', workflow)
    .orderBy('version')
    .execute();
  return rows.map((r) => r.version);
}

/** The versions whose ranges a list reads: none to look up unless `filter.workflow` is set without a version. */
export async function versionsToList(db: Kysely<LedgerflowDatabase>, filter: RunListFilter): Promise<number[]> {
  return filter.workflow !== undefined && filter.version === undefined
    ? await workflowVersions(db, filter.workflow)
    : [];
}

/**
 * One page of runs: `limit + 1` rows are read to know whether another page follows. `versions`
 * are the workflow's versions when `filter.workflow` is set without a version
 * ({@link versionsToList}).
 */
export function runPageQuery<C extends RunListColumns = 'summary'>(
  filter: RunListFilter,
  cursor: RunCursor | undefined,
  limit: number,
  versions: readonly number[] = [],
  columns: C = 'summary' as C,
): RawBuilder<RowOf[C]> {
  const selected = COLUMNS[columns];
  if (filter.dedupeKey !== undefined)
    return keySearchQuery<RowOf[C]>(filter, filter.dedupeKey, cursor, limit, selected);
  const after =
    cursor === undefined
      ? sql``
      : cursor.by === 'created'
        ? sql`AND (created_at, id) < (${cursor.createdAt}::timestamptz, ${cursor.id}::uuid)`
        : undefined;
  if (after === undefined) throw new TypeError('A key-search cursor cannot page a list without a key search.');
  const created = createdRange(filter);
  // Each range is its own ordered, limited subquery: PostgreSQL sees the status (and workflow,
  // version) as constants there, so the index gives the order and the scan stops after a page.
  // A flattened UNION ALL would lose that and sort every matching run.
  const branches = rangeBranches(filter, versions).map(
    (where) =>
      sql`(SELECT ${selected} FROM ledgerflow.workflow_run WHERE ${where} ${created} ${after} ORDER BY created_at DESC, id DESC LIMIT ${limit + 1})`,
  );
  if (branches.length === 0) return sql<RowOf[C]>`SELECT ${selected} FROM ledgerflow.workflow_run WHERE false`;
  return sql<
    RowOf[C]
  >`SELECT * FROM (${sql.join(branches, sql` UNION ALL `)}) AS runs ORDER BY created_at DESC, id DESC LIMIT ${limit + 1}`;
}

/**
 * Per status, how many runs match the filter's workflow, version, parent and time range (not its
 * key search), counted up to {@link STATUS_COUNT_CAP} + 1 from the same index ranges as the list:
 * at most that many index entries per status.
 */
export function statusCountsQuery(
  filter: RunListFilter,
  versions: readonly number[] = [],
): RawBuilder<{ status: RunStatus; count: number }> {
  const created = createdRange(filter);
  const scope =
    filter.workflow === undefined
      ? sql``
      : sql`AND r.workflow_name = ${filter.workflow} AND r.workflow_version = ANY(${filter.version !== undefined ? [filter.version] : [...versions]}::int[])`;
  const parent = filter.parentRunId === undefined ? sql`` : sql`AND r.parent_run_id = ${filter.parentRunId}`;
  return sql<{ status: RunStatus; count: number }>`
    SELECT s.status, (SELECT count(*)::int FROM (
             SELECT 1 FROM ledgerflow.workflow_run r WHERE r.status = s.status ${scope} ${parent} ${created} LIMIT ${STATUS_COUNT_CAP + 1}) AS capped) AS count
      FROM unnest(${[...RUN_STATUSES]}::text[]) AS s(status)`;
}

/** A page of {@link runPageQuery} read: at most `limit` rows, and the cursor of the next page. */
async function readRunPage<C extends RunListColumns>(
  db: Kysely<LedgerflowDatabase>,
  filter: RunListFilter,
  cursor: RunCursor | undefined,
  limit: number,
  versions: readonly number[],
  columns: C,
): Promise<RunPage<RowOf[C]>> {
  const { rows } = await runPageQuery(filter, cursor, limit, versions, columns).execute(db);
  const shown = rows.slice(0, limit);
  const last = shown.at(-1);
  const next: RunCursor | undefined =
    rows.length <= limit || last === undefined
      ? undefined
      : filter.dedupeKey !== undefined
        ? { by: 'key', dedupeKey: last.dedupe_key ?? '', id: last.id }
        : { by: 'created', createdAt: last.created_key, id: last.id };
  return { rows: shown, next };
}

/** The dashboard's runs page: a page of summary rows, and the counts per status of the same filter. */
export async function loadRunPage(
  db: Kysely<LedgerflowDatabase>,
  filter: RunListFilter,
  cursor: RunCursor | undefined,
  limit: number,
): Promise<{ page: RunPage; counts: ReadonlyMap<RunStatus, number> }> {
  const versions = await versionsToList(db, filter);
  const [page, counted] = await Promise.all([
    readRunPage(db, filter, cursor, limit, versions, 'summary'),
    statusCountsQuery(filter, versions).execute(db),
  ]);
  return { page, counts: new Map(counted.rows.map((r) => [r.status, r.count])) };
}

/** `client.listRuns`: the first `limit` runs of the list, whole rows, newest first. */
export async function listRunRows(
  db: Kysely<LedgerflowDatabase>,
  filter: RunListFilter,
  limit: number,
): Promise<WorkflowRunRow[]> {
  const page = await readRunPage(db, filter, undefined, limit, await versionsToList(db, filter), 'all');
  return page.rows.map(({ created_key: _cursorKey, ...run }) => run);
}

/**
 * The first string after every string that starts with `prefix`, in byte (code point) order:
 * the prefix with its last character moved one code point on (characters at U+10FFFF dropped
 * first). `undefined` when there is none (an empty prefix, or one of U+10FFFF only).
 *
 * @example
 * prefixUpperBound('order-'); // 'order.'
 */
export function prefixUpperBound(prefix: string): string | undefined {
  const chars = [...prefix];
  while (chars.length > 0) {
    const last = chars.pop()!.codePointAt(0)!;
    if (last < 0x10ffff) {
      // Surrogate code points cannot appear in text; the next character after U+D7FF is U+E000.
      const next = last === 0xd7ff ? 0xe000 : last + 1;
      return chars.join('') + String.fromCodePoint(next);
    }
  }
  return undefined;
}

/**
 * The equality prefix of each index range the list merges: per status, or per (workflow, version,
 * status); a parent's children are one range of their own index (workflow_run_child_unique).
 */
function rangeBranches(filter: RunListFilter, versions: readonly number[]): RawBuilder<unknown>[] {
  if (filter.parentRunId !== undefined) return [sql`parent_run_id = ${filter.parentRunId} ${otherFilters(filter)}`];
  const statuses = filter.statuses.length > 0 ? filter.statuses : RUN_STATUSES;
  if (filter.workflow === undefined) return statuses.map((status) => sql`status = ${status}`);
  const workflow = filter.workflow;
  const inVersions = filter.version !== undefined ? [filter.version] : versions;
  return inVersions.flatMap((version) =>
    statuses.map((status) => sql`workflow_name = ${workflow} AND workflow_version = ${version} AND status = ${status}`),
  );
}

function createdRange(filter: RunListFilter): RawBuilder<unknown> {
  const from = filter.createdFrom === undefined ? sql`` : sql`AND created_at >= ${filter.createdFrom}`;
  const before = filter.createdBefore === undefined ? sql`` : sql`AND created_at < ${filter.createdBefore}`;
  return sql`${from} ${before}`;
}

/** A key search reads the dedupe-key index in byte order; the other filters apply to its matches. */
function keySearchQuery<Row>(
  filter: RunListFilter,
  key: NonNullable<RunListFilter['dedupeKey']>,
  cursor: RunCursor | undefined,
  limit: number,
  columns: RawBuilder<unknown>,
): RawBuilder<Row> {
  if (cursor !== undefined && cursor.by !== 'key')
    throw new TypeError('A newest-first cursor cannot page a key search.');
  const upper = key.match === 'prefix' ? prefixUpperBound(key.value) : undefined;
  const range =
    key.match === 'exact'
      ? sql`dedupe_key COLLATE "C" = ${key.value}`
      : sql`dedupe_key COLLATE "C" >= ${key.value} ${upper === undefined ? sql`` : sql`AND dedupe_key COLLATE "C" < ${upper}`}`;
  const after =
    cursor === undefined ? sql`` : sql`AND (dedupe_key COLLATE "C", id) > (${cursor.dedupeKey}, ${cursor.id}::uuid)`;
  const parent = filter.parentRunId === undefined ? sql`` : sql`AND parent_run_id = ${filter.parentRunId}`;
  return sql<Row>`
    SELECT ${columns} FROM ledgerflow.workflow_run
     WHERE dedupe_key IS NOT NULL AND ${range} ${after} ${otherFilters(filter)} ${parent} ${createdRange(filter)}
     ORDER BY dedupe_key COLLATE "C", id LIMIT ${limit + 1}`;
}

/** The status, workflow and version filters of a range that is not theirs (a key search, a parent's children). */
function otherFilters(filter: RunListFilter): RawBuilder<unknown> {
  const statuses = filter.statuses.length > 0 ? sql`AND status = ANY(${[...filter.statuses]}::text[])` : sql``;
  const workflow = filter.workflow === undefined ? sql`` : sql`AND workflow_name = ${filter.workflow}`;
  const version = filter.version === undefined ? sql`` : sql`AND workflow_version = ${filter.version}`;
  return sql`${statuses} ${workflow} ${version}`;
}
