import { createHash } from 'node:crypto';

/**
 * JSON with object keys sorted at every level, so that equal values hash equally whatever
 * order their properties were built in. `undefined` properties are dropped, as JSON does.
 */
export function stableJson(value: unknown): string {
  return JSON.stringify(sortKeys(value)) ?? 'null';
}

/** What the ledger stores in `request_hash`: sha256 of the stable JSON of the request. */
export function requestHash(request: unknown): string {
  return createHash('sha256').update(stableJson(request)).digest('hex');
}

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
