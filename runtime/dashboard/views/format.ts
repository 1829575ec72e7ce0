import { formatStoredError, formatTime } from '../../presentation/format-values.js';
import { html, type Html } from '../html.js';

export { formatStoredError, formatTime };

/** A jsonb value, indented, in a scrolling block; `-` for none. */
export function jsonBlock(value: unknown): Html {
  if (value === null || value === undefined) return html`<span class="muted">-</span>`;
  return html`<pre>${JSON.stringify(value, null, 2)}</pre>`;
}

/**
 * A stored error (`{ name, message, stack?, code?, issues?, … }`) as a person reads it: its name
 * and message as text, line breaks kept, and the rest — stack, code, validation issues, other
 * fields — behind a click. Anything else stored as an error is shown as JSON.
 */
export function errorBlock(value: unknown): Html {
  if (value === null || value === undefined) return html`<span class="muted">-</span>`;
  if (typeof value !== 'object' || Array.isArray(value) || !('message' in value) || typeof value.message !== 'string')
    return jsonBlock(value);
  const { name: _name, message: _message, stack, issues, ...rest } = value as Record<string, unknown>;
  const fields = [
    ...Object.entries(rest).map(([field, v]) => `${field}: ${typeof v === 'string' ? v : JSON.stringify(v)}`),
    ...(Array.isArray(issues) && issues.length > 0
      ? [`issues:\n${issues.map((i) => `  - ${String(i)}`).join('\n')}`]
      : []),
  ];
  const details = [...(fields.length > 0 ? [fields.join('\n')] : []), ...(typeof stack === 'string' ? [stack] : [])];
  return html`<p class="error-text">${formatStoredError(value)}</p>${
    details.length === 0 ? '' : html`<details><summary>Details</summary><pre>${details.join('\n\n')}</pre></details>`
  }`;
}

/**
 * When an intent's horizon comes, from the database's clock: "due" once it has passed (the
 * reconciler may ask the provider), else "in 45 s", "in 3 min", "in 2 h", "in 4 d".
 */
export function horizonText(horizon: Date | null, now: Date): string {
  if (horizon === null) return '-';
  const ms = horizon.getTime() - now.getTime();
  if (ms <= 0) return 'due';
  const s = Math.ceil(ms / 1000);
  if (s < 60) return `in ${s} s`;
  const min = Math.round(s / 60);
  if (min < 60) return `in ${min} min`;
  const h = Math.round(min / 60);
  if (h < 48) return `in ${h} h`;
  return `in ${Math.round(h / 24)} d`;
}

/** A uuid shortened for a table cell; the full id is in the link and its title. */
export function shortId(id: string): string {
  return id.slice(0, 8);
}
