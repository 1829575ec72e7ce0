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
  return plainJson(value) ?? sortedJson(value);
}

/**
 * The definition of {@link stableJson}'s text: every object's keys sorted into a new object, then
 * `JSON.stringify`. Any value; what {@link plainJson} does not write comes here.
 */
export function sortedJson(value: unknown): string {
  return JSON.stringify(sortKeys(value)) ?? 'null';
}

/** {@link plainJson}'s answer for a value it does not write: the general path writes it. */
const NOT_PLAIN = undefined;

/**
 * The same text for the values requests usually are — null, booleans, finite numbers, strings,
 * arrays of them and plain objects without array-index keys — written directly: every effect step
 * hashes its request, and sorting into new objects was most of that hash's CPU. Anything else
 * (a Date, a class instance, a function, a hole or `undefined` in an array, a non-finite number, a
 * key such as "10") gives {@link NOT_PLAIN}. Array-index keys are left to the general path because
 * an object lists them first in numeric order, not in the sorted order of the others.
 */
function plainJson(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : NOT_PLAIN;
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      break;
    default:
      return NOT_PLAIN;
  }
  if (value === null) return 'null';
  if (Array.isArray(value)) {
    let text = '[';
    for (let i = 0; i < value.length; i += 1) {
      const element = plainJson(value[i]);
      if (element === NOT_PLAIN) return NOT_PLAIN;
      text += i === 0 ? element : `,${element}`;
    }
    return `${text}]`;
  }
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return NOT_PLAIN;
  const source = value as Record<string, unknown>;
  const keys = Object.keys(source);
  // Array-index keys come first when there are any (ordinary objects list them so).
  if (keys.length > 0 && isArrayIndex(keys[0]!)) return NOT_PLAIN;
  keys.sort();
  let text = '{';
  for (const key of keys) {
    const property = source[key];
    if (property === undefined) continue;
    const json = plainJson(property);
    if (json === NOT_PLAIN) return NOT_PLAIN;
    text += `${text.length === 1 ? '' : ','}${JSON.stringify(key)}:${json}`;
  }
  return `${text}}`;
}

function isArrayIndex(key: string): boolean {
  return /^(?:0|[1-9]\d*)$/.test(key) && Number(key) < 2 ** 32 - 1;
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
