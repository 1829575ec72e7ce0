/*
 * How stored values read in a terminal and on a page: database times, compact JSON, stored
 * errors, and the `--json` documents of the CLI. Here, below the CLI and the dashboard, because
 * both print the same values the same way and the dashboard does not import the CLI.
 */

/**
 * Database times, second precision, always UTC so two machines print the same text. PostgreSQL's
 * `infinity` (the `run_after` of a run that waits with no timer) arrives as the number
 * `Infinity` from pg and PGlite alike, whatever the column's type says, and prints as `infinity`.
 */
export function formatTime(value: Date | number | null | undefined): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'number') return value > 0 ? 'infinity' : '-infinity';
  return `${value.toISOString().slice(0, 19).replace('T', ' ')}Z`;
}

/** Compact JSON for a table cell or a field, cut at `max` characters. */
export function formatJson(value: unknown, max = Infinity): string {
  if (value === null || value === undefined) return '-';
  const text = JSON.stringify(value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** The message of a stored error (`{ name, message, … }`), else its JSON. */
export function formatStoredError(value: unknown, max = Infinity): string {
  if (value === null || value === undefined) return '-';
  if (typeof value === 'object' && 'message' in value && typeof value.message === 'string') {
    const name = 'name' in value && typeof value.name === 'string' ? `${value.name}: ` : '';
    const text = `${name}${value.message}`;
    return text.length > max ? `${text.slice(0, max - 1)}…` : text;
  }
  return formatJson(value, max);
}

/**
 * JSON for `--json`: dates as ISO strings, two-space indent, trailing newline. An infinite
 * timestamp (see {@link formatTime}) is `"infinity"`, not the `null` JSON would make of it; jsonb
 * values (inputs, outputs) cannot hold one.
 */
export function toJsonDocument(value: unknown): string {
  return `${JSON.stringify(value, infinityAsText, 2)}\n`;
}

function infinityAsText(_key: string, value: unknown): unknown {
  if (value === Infinity) return 'infinity';
  if (value === -Infinity) return '-infinity';
  return value;
}
