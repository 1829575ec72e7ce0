import type { Json } from './tables.js';

/**
 * A value in the form it comes back from a `jsonb` column: what `JSON.parse` returns for the
 * jsonb of `JSON.stringify(value)`, on both stores, without the round trip.
 *
 * Why: the runtime goes on with a step's output in memory right after recording it, but every
 * later claim (a take-over, a retry) reads it back from jsonb, which keeps no key order of its
 * own — it orders an object's keys by the length of their UTF-8 bytes, then bytewise. A key,
 * request, condition or match that serialises or iterates an output (`JSON.stringify(steps.x)`,
 * `Object.values(steps.x)`) would otherwise compute one value on the first attempt and another
 * after a reload. So outputs are kept in this form from the moment they are recorded.
 *
 * What changes, as `JSON.stringify` then jsonb would change it: `toJSON` is called (a `Date`
 * becomes its ISO string); boxed primitives are unboxed; `undefined`, functions and symbols are
 * dropped from objects and become `null` in arrays; non-finite numbers become `null` and `-0`
 * becomes `0`; object keys take jsonb's order. Other numbers are unchanged: jsonb keeps the
 * decimal `JSON.stringify` wrote exactly (`numeric`), and parsing it gives the same double back
 * (`1e21`, `2 ** 60`, `0.1 + 0.2` included). `undefined` (or a function, a symbol) at the top
 * has no JSON form: it returns `undefined`. A `bigint` throws, as `JSON.stringify` does. Cycles
 * are not detected: pass a value `JSON.stringify` accepted (`payloadJson` checks that first).
 *
 * @example
 * toStoredJson({ zeta: 1, a: new Date(0), mid: undefined }); // { a: '1970-01-01T00:00:00.000Z', zeta: 1 }
 */
export function toStoredJson(value: unknown): Json | undefined {
  return stored(value, '');
}

/**
 * `outputs` (stored form) with `name` set to `output` (stored form), its keys in jsonb's order:
 * the `steps` a claim reads back (`jsonb_object_agg` of the step results) and a run's output.
 * Only the top level is ordered; the values are taken as they are.
 */
export function withStoredOutput(
  outputs: Readonly<Record<string, Json>>,
  name: string,
  output: Json,
): Readonly<Record<string, Json>> {
  const keys = Object.keys(outputs);
  if (!Object.hasOwn(outputs, name)) keys.push(name);
  keys.sort(compareStoredKeys);
  const result: Record<string, Json> = {};
  for (const key of keys) setOwn(result, key, key === name ? output : outputs[key]!);
  return result;
}

/**
 * jsonb's order of object keys (PostgreSQL's `lengthCompareJsonbStringValue`): shorter UTF-8
 * first, then bytewise — which for UTF-8 is code point order. JavaScript compares strings by
 * UTF-16 code unit, which puts U+E000..U+FFFF after the surrogates of higher code points; the
 * first differing unit is corrected for that as ICU's `u_strCompare` does in code point order.
 */
export function compareStoredKeys(a: string, b: string): number {
  const byLength = utf8Length(a) - utf8Length(b);
  if (byLength !== 0) return byLength;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i += 1) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return x >= 0xd800 && y >= 0xd800 ? codePointOrder(x) - codePointOrder(y) : x - y;
  }
  return 0;
}

/** A code unit at or above U+D800 placed so that surrogates (code points past U+FFFF) sort last. */
function codePointOrder(unit: number): number {
  return unit >= 0xe000 ? unit - 0x800 : unit + 0x2000;
}

function utf8Length(s: string): number {
  let bytes = s.length;
  for (let i = 0; i < s.length; i += 1) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && isLowSurrogate(s.charCodeAt(i + 1))) {
      // A surrogate pair: two units, four bytes.
      bytes += 2;
      i += 1;
    } else bytes += 2;
  }
  return bytes;
}

function isLowSurrogate(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}

/** `JSON.stringify`'s SerializeJSONProperty, building values instead of text. */
function stored(input: unknown, key: string): Json | undefined {
  let value = input;
  if ((typeof value === 'object' && value !== null) || typeof value === 'bigint') {
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') value = (toJSON as (key: string) => unknown).call(value, key);
  }
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      // `+ 0` turns -0 into 0, as JSON.stringify writes it.
      return Number.isFinite(value) ? value + 0 : null;
    case 'bigint':
      throw new TypeError('Do not know how to serialize a BigInt');
    case 'object':
      if (value === null) return null;
      if (Array.isArray(value)) return storedArray(value);
      if (value instanceof Number) return stored(Number(value), key);
      if (value instanceof String) return String(value);
      if (value instanceof Boolean) return value.valueOf();
      return storedObject(value as Record<string, unknown>);
    default:
      return undefined;
  }
}

function storedArray(array: readonly unknown[]): Json[] {
  const result = new Array<Json>(array.length);
  for (let i = 0; i < array.length; i += 1) result[i] = stored(array[i], String(i)) ?? null;
  return result;
}

function storedObject(source: Record<string, unknown>): Record<string, Json> {
  const keys: string[] = [];
  const values: Json[] = [];
  let sorted = true;
  for (const key of Object.keys(source)) {
    const value = stored(source[key], key);
    if (value === undefined) continue;
    if (sorted && keys.length > 0 && compareStoredKeys(keys[keys.length - 1]!, key) > 0) sorted = false;
    keys.push(key);
    values.push(value);
  }
  const result: Record<string, Json> = {};
  if (sorted) {
    for (let i = 0; i < keys.length; i += 1) setOwn(result, keys[i]!, values[i]!);
  } else {
    const order = keys.map((_, i) => i).sort((a, b) => compareStoredKeys(keys[a]!, keys[b]!));
    for (const i of order) setOwn(result, keys[i]!, values[i]!);
  }
  return result;
}

/** An own property, also for the key `__proto__` (which `JSON.parse` makes an own property too). */
function setOwn(target: Record<string, Json>, key: string, value: Json): void {
  if (key === '__proto__')
    Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
  else target[key] = value;
}
