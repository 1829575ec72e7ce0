import { RUN_STATUSES, type RunStatus } from '../store/tables.js';
import type { OpenIntentCursor } from './open-intents.js';
import type { RunCursor, RunListFilter } from '../client/run-list.js';

/** A query string the dashboard cannot read: answered 400 with this message, naming what to fix. */
export class BadRequestError extends Error {
  override readonly name = 'BadRequestError';
}

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 500;
/** Longest dedupe key a search accepts (the longest a run may have is 1 000 characters). */
const MAX_KEY_LENGTH = 1_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

export interface RunListParams {
  readonly filter: RunListFilter;
  readonly cursor: RunCursor | undefined;
  readonly limit: number;
}

/**
 * The runs list's query string: `status` (repeatable), `workflow`, `version`, `from` and `to`
 * (ISO times; without a zone, UTC — what a datetime-local field sends), `key` with `match`
 * exact|prefix, `limit`, and `after` (the cursor of the previous page). Empty fields are absent.
 */
export function parseRunListParams(query: URLSearchParams): RunListParams {
  const statuses = query.getAll('status').filter((s) => s !== '');
  for (const status of statuses) {
    if (!(RUN_STATUSES as readonly string[]).includes(status)) {
      throw new BadRequestError(`Unknown status "${status}". Use one of: ${RUN_STATUSES.join(', ')}.`);
    }
  }
  const workflow = field(query, 'workflow');
  const versionText = field(query, 'version');
  let version: number | undefined;
  if (versionText !== undefined) {
    if (!/^\d{1,9}$/.test(versionText) || Number(versionText) < 1) {
      throw new BadRequestError(`version must be a positive integer (got "${versionText}").`);
    }
    if (workflow === undefined)
      throw new BadRequestError('A version filter needs a workflow: choose the workflow too.');
    version = Number(versionText);
  }
  const createdFrom = timeField(query, 'from');
  const createdBefore = timeField(query, 'to');
  if (createdFrom !== undefined && createdBefore !== undefined && createdFrom >= createdBefore) {
    throw new BadRequestError('"from" must be before "to".');
  }
  const key = query.get('key') ?? '';
  const match = field(query, 'match') ?? 'exact';
  if (match !== 'exact' && match !== 'prefix')
    throw new BadRequestError(`match must be exact or prefix (got "${match}").`);
  if (key.length > MAX_KEY_LENGTH)
    throw new BadRequestError(`The dedupe key search is longer than ${MAX_KEY_LENGTH} characters.`);
  const filter: RunListFilter = {
    statuses: [...new Set(statuses)] as RunStatus[],
    ...(workflow !== undefined ? { workflow } : {}),
    ...(version !== undefined ? { version } : {}),
    ...(createdFrom !== undefined ? { createdFrom } : {}),
    ...(createdBefore !== undefined ? { createdBefore } : {}),
    ...(key !== '' ? { dedupeKey: { value: key, match } } : {}),
  };
  const after = field(query, 'after');
  return { filter, cursor: after === undefined ? undefined : decodeRunCursor(after, filter), limit: pageSize(query) };
}

export function parseIntentParams(query: URLSearchParams): {
  readonly cursor: OpenIntentCursor | undefined;
  readonly limit: number;
} {
  const after = field(query, 'after');
  if (after === undefined) return { cursor: undefined, limit: pageSize(query) };
  const parts = decodeCursor(after);
  const [intentAt, runId, stepName, key] = parts;
  if (
    parts.length !== 4 ||
    !CURSOR_TIME.test(intentAt ?? '') ||
    !UUID.test(runId ?? '') ||
    stepName === undefined ||
    key === undefined
  ) {
    throw new BadRequestError('The "after" cursor is not one this dashboard wrote; start from the first page.');
  }
  return { cursor: { intentAt: intentAt!, runId: runId!, stepName, key }, limit: pageSize(query) };
}

/** A cursor as an opaque URL-safe string: the base64url of a JSON array of strings. */
export function encodeCursor(parts: readonly string[]): string {
  return Buffer.from(JSON.stringify(parts)).toString('base64url');
}

export function encodeRunCursor(cursor: RunCursor): string {
  return encodeCursor(
    cursor.by === 'created' ? ['c', cursor.createdAt, cursor.id] : ['k', cursor.dedupeKey, cursor.id],
  );
}

export function encodeIntentCursor(cursor: OpenIntentCursor): string {
  return encodeCursor([cursor.intentAt, cursor.runId, cursor.stepName, cursor.key]);
}

function decodeRunCursor(text: string, filter: RunListFilter): RunCursor {
  const [by, at, id, ...rest] = decodeCursor(text);
  const invalid = new BadRequestError(
    'The "after" cursor is not one this dashboard wrote for these filters; start from the first page.',
  );
  if (rest.length > 0 || at === undefined || id === undefined || !UUID.test(id)) throw invalid;
  if (by === 'c' && filter.dedupeKey === undefined && CURSOR_TIME.test(at)) return { by: 'created', createdAt: at, id };
  if (by === 'k' && filter.dedupeKey !== undefined) return { by: 'key', dedupeKey: at, id };
  throw invalid;
}

function decodeCursor(text: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  if (!Array.isArray(parsed) || !parsed.every((p): p is string => typeof p === 'string')) {
    throw new BadRequestError('The "after" cursor is not one this dashboard wrote; start from the first page.');
  }
  return parsed;
}

function pageSize(query: URLSearchParams): number {
  const text = field(query, 'limit');
  if (text === undefined) return DEFAULT_PAGE_SIZE;
  if (!/^\d{1,4}$/.test(text) || Number(text) < 1 || Number(text) > MAX_PAGE_SIZE) {
    throw new BadRequestError(`limit must be an integer from 1 to ${MAX_PAGE_SIZE} (got "${text}").`);
  }
  return Number(text);
}

function field(query: URLSearchParams, name: string): string | undefined {
  const value = query.get(name)?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/** An ISO time; without a zone (a datetime-local field's `2026-03-01T12:00`) it is UTC, as the dashboard shows times. */
function timeField(query: URLSearchParams, name: string): Date | undefined {
  const text = field(query, name);
  if (text === undefined) return undefined;
  const iso = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?$/.test(text)
    ? `${text.length === 10 ? `${text}T00:00` : text}Z`
    : text;
  const time = /^\d{4}-\d{2}-\d{2}/.test(text) ? new Date(iso) : new Date(Number.NaN);
  if (Number.isNaN(time.getTime())) {
    throw new BadRequestError(
      `"${name}" must be a time like 2026-03-01T12:00 (UTC) or an ISO time with a zone (got "${text}").`,
    );
  }
  return time;
}
