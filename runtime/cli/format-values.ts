/** Database times, second precision, always UTC so two machines print the same text. */
export function formatTime(value: Date | null | undefined): string {
  if (value === null || value === undefined) return '-';
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

/** JSON for `--json`: dates as ISO strings, two-space indent, trailing newline. */
export function toJsonDocument(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}
