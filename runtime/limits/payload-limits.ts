import { z } from 'zod';
import { ALWAYS_CHECKED, checkOptions, integer, rule } from '../../dsl/option-checks.js';
import type { Kysely } from 'kysely';
import { notMigratedError, PayloadTooLargeError, ValidationError, type PayloadKind } from '../errors.js';
import type { Json, LedgerflowDatabase } from '../store/tables.js';
import { JsonDepthError, jsonByteLength } from './json-size.js';

/**
 * The largest JSON, in UTF-8 bytes, ledgerflow writes for each kind of payload: one row in the
 * database (core 0014, `ledgerflow.payload_limits`), so every client and worker applies the same
 * limits and `ledgerflow limits set` changes them for all. Inputs, outputs and event payloads
 * over their limit are refused before anything is sent; an error record over its limit is
 * truncated (an error must always be recordable).
 */
export interface PayloadLimits {
  /** A run's input: `client.start`, a child a step starts, a schedule's tick. */
  readonly maxInputBytes: number;
  /** A step's output: the step fails (not retried) with {@link PayloadTooLargeError}. */
  readonly maxOutputBytes: number;
  /** An event's payload: `client.sendEvent`, `signal`. */
  readonly maxEventPayloadBytes: number;
  /** An attempt's or run's error record: longer ones are truncated, with a marker. */
  readonly maxErrorBytes: number;
}

/** The defaults core 0014 stores: 1 MiB for data, 64 KiB for an error record. */
export const DEFAULT_PAYLOAD_LIMITS: PayloadLimits = {
  maxInputBytes: 1_048_576,
  maxOutputBytes: 1_048_576,
  maxEventPayloadBytes: 1_048_576,
  maxErrorBytes: 65_536,
};

/** What each limit may be set to (the migration's CHECK constraints say the same). */
export const PAYLOAD_LIMIT_RANGES: Readonly<
  Record<keyof PayloadLimits, { readonly min: number; readonly max: number }>
> = {
  maxInputBytes: { min: 64, max: 268_435_456 },
  maxOutputBytes: { min: 64, max: 268_435_456 },
  maxEventPayloadBytes: { min: 64, max: 268_435_456 },
  maxErrorBytes: { min: 1_024, max: 16_777_216 },
};

/**
 * Objects and arrays may nest this deep in an input, output or event payload, and no deeper: a
 * fixed bound, not a setting — deeper JSON overflows stacks (JSON.stringify's, PostgreSQL's jsonb
 * parser's, PGlite's smaller one) rather than costing space.
 */
export const MAX_JSON_DEPTH = 1_000;

/** The option of `ledgerflow limits set` for each limit, named in every refusal. */
export const LIMIT_OPTIONS: Readonly<Record<keyof PayloadLimits, string>> = {
  maxInputBytes: '--max-input-bytes',
  maxOutputBytes: '--max-output-bytes',
  maxEventPayloadBytes: '--max-event-payload-bytes',
  maxErrorBytes: '--max-error-bytes',
};

const COLUMNS = {
  maxInputBytes: 'max_input_bytes',
  maxOutputBytes: 'max_output_bytes',
  maxEventPayloadBytes: 'max_event_payload_bytes',
  maxErrorBytes: 'max_error_bytes',
} as const satisfies Record<keyof PayloadLimits, string>;

const LIMIT_OF: Readonly<Record<PayloadKind, keyof PayloadLimits>> = {
  'run input': 'maxInputBytes',
  'step output': 'maxOutputBytes',
  'event payload': 'maxEventPayloadBytes',
};

/** The limits as stored, with when they were last changed. */
export interface StoredPayloadLimits extends PayloadLimits {
  readonly updatedAt: Date;
}

/** Reads the limits row. A database without core 0014 gets a MigrationError saying to migrate. */
export async function readPayloadLimits(db: Kysely<LedgerflowDatabase>): Promise<StoredPayloadLimits> {
  try {
    const row = await db.selectFrom('ledgerflow.payload_limits').selectAll().executeTakeFirstOrThrow();
    return {
      maxInputBytes: row.max_input_bytes,
      maxOutputBytes: row.max_output_bytes,
      maxEventPayloadBytes: row.max_event_payload_bytes,
      maxErrorBytes: row.max_error_bytes,
      updatedAt: row.updated_at,
    };
  } catch (error) {
    throw notMigratedError(error) ?? error;
  }
}

/** What a change of the limits may hold: each limit in its range, or left out; nothing else. */
const limitsChangeSchema = z
  .looseObject(
    Object.fromEntries(
      Object.entries(PAYLOAD_LIMIT_RANGES).map(([name, { min, max }]) => [
        name,
        // optional(), not exactOptional() (zod 4.3+; the peer range starts at 4.0.0): undefined counts as left out.
        rule(integer().min(min).max(max), `must be a whole number of bytes from ${min} to ${max}`).optional(),
      ]),
    ),
  )
  .superRefine((change, ctx) => {
    for (const name of Object.keys(change)) {
      if (!Object.hasOwn(PAYLOAD_LIMIT_RANGES, name))
        ctx.addIssue({ code: 'custom', path: [name], message: `not a limit (${Object.keys(COLUMNS).join(', ')})` });
    }
  }, ALWAYS_CHECKED);

/**
 * Changes some limits for every client and worker of the database (each sees the change within
 * {@link LIMITS_CACHE_MS}); returns them all. Out-of-range values are refused, naming the range.
 */
export async function setPayloadLimits(
  db: Kysely<LedgerflowDatabase>,
  change: Partial<PayloadLimits>,
): Promise<StoredPayloadLimits> {
  checkOptions(
    limitsChangeSchema,
    change,
    (problems) =>
      new ValidationError(
        `Invalid limits:\n${problems.map((p) => `  - ${p}`).join('\n')}\nNothing was changed.`,
        problems,
      ),
    { separator: ': ' },
  );
  const set = Object.fromEntries(
    Object.entries(change).map(([name, value]) => [COLUMNS[name as keyof PayloadLimits], value]),
  );
  try {
    await db
      .updateTable('ledgerflow.payload_limits')
      .set({ ...set, updated_at: new Date() })
      .execute();
  } catch (error) {
    throw notMigratedError(error) ?? error;
  }
  return readPayloadLimits(db);
}

/**
 * Refuses a payload over its limit or nested deeper than {@link MAX_JSON_DEPTH}, before its JSON
 * text is built; returns the JSON text otherwise. `what` names it in the message
 * (`workflow "payout" v1`, `step "charge" of workflow "payout"`, `event "shipped"`).
 */
export function payloadJson(kind: PayloadKind, what: string, value: unknown, limits: PayloadLimits): string {
  const limitName = LIMIT_OF[kind];
  const limit = limits[limitName];
  let bytes: number;
  try {
    bytes = jsonByteLength(value, MAX_JSON_DEPTH);
  } catch (error) {
    if (!(error instanceof JsonDepthError)) throw error;
    throw new ValidationError(
      `The ${kind} of ${what} cannot be stored: ${error.message}; flatten it (at most ${MAX_JSON_DEPTH} levels). Nothing was written.`,
      [`(${kind}): nested deeper than ${MAX_JSON_DEPTH} levels`],
    );
  }
  if (bytes > limit) {
    throw new PayloadTooLargeError(
      `The ${kind} of ${what} is ${bytes} bytes of JSON; the limit is ${limit} (ledgerflow limits set ${LIMIT_OPTIONS[limitName]} <bytes>, ` +
        'or keep large data elsewhere and pass a reference). Nothing was written.',
      { kind, bytes, limit },
    );
  }
  return JSON.stringify(value);
}

/**
 * An error record that fits `maxBytes` of JSON: unchanged when it does; otherwise every string in
 * it is cut (never inside a surrogate pair) and every array shortened, each cut marked, until it
 * fits, and `truncated: { bytes, limit }` says how large it was. Never refuses: a failure that
 * cannot be recorded would look like a crash.
 */
export function fitErrorRecord<T extends { readonly [key: string]: Json | undefined }>(error: T, maxBytes: number): T {
  const bytes = jsonByteLength(error, Number.MAX_SAFE_INTEGER);
  if (bytes <= maxBytes) return error;
  for (let keep = Math.floor(maxBytes / 2); ; keep = Math.floor(keep / 2)) {
    const cut = cutJson(error, keep) as { [key: string]: Json };
    const candidate = { ...cut, truncated: { bytes, limit: maxBytes } } as unknown as T;
    if (jsonByteLength(candidate, Number.MAX_SAFE_INTEGER) <= maxBytes || keep === 0) return candidate;
  }
}

function cutJson(value: unknown, keep: number): unknown {
  if (typeof value === 'string') {
    if (value.length <= keep) return value;
    const end = keep > 0 && /[\uD800-\uDBFF]/.test(value[keep - 1]!) ? keep - 1 : keep;
    return `${value.slice(0, end)}… [${value.length - end} more characters cut, over the error record limit]`;
  }
  if (Array.isArray(value)) {
    const items = Math.ceil(keep / 64);
    const kept = value.slice(0, items).map((item: unknown) => cutJson(item, keep) ?? null);
    return value.length > items ? [...kept, `… ${value.length - items} more items cut`] : kept;
  }
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, cutJson(item, keep)]));
  }
  return value;
}
