import * as crypto from 'node:crypto';

/**
 * JSON with object keys sorted at every level, so that equal values hash equally whatever
 * order their properties were built in. `undefined` properties are dropped, as JSON does.
 */
export function stableJson(value: unknown): string {
  return JSON.stringify(sortKeys(value)) ?? 'null';
}

/** What the ledger stores in `request_hash`: sha256 of the stable JSON of the request. */
export function requestHash(request: unknown): string {
  return sha256Hex(stableJson(request));
}

/**
 * Every effect step hashes its request: the one-shot `crypto.hash` (Node 20.12 and later) costs
 * a fifth of a `Hash` object's; earlier releases of Node 20 get the same digest the long way.
 */
const sha256Hex: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'hex')
    : (text) => crypto.createHash('sha256').update(text).digest('hex');

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    const source = value as Record<string, unknown>;
    return Object.fromEntries(
      Object.keys(source)
        .sort()
        .filter((key) => source[key] !== undefined)
        .map((key) => [key, sortKeys(source[key])]),
    );
  }
  return value;
}
