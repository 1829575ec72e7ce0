/*
 * The JSON text the runtime's own hashes are taken of: the ledger's `request_hash`
 * (worker/request-hash.ts) and the parts of a workflow's fingerprint
 * (contracts/workflow-fingerprint.ts). Here, below both, because the same value must give the
 * same text — and so the same hash — wherever it is computed.
 */

/**
 * JSON with object keys sorted at every level, so that equal values hash equally whatever
 * order their properties were built in. `undefined` properties are dropped, as JSON does.
 */
export function stableJson(value: unknown): string {
  return JSON.stringify(sortKeys(value)) ?? 'null';
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
