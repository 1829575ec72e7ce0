import fc from 'fast-check';
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { toStoredJson, withStoredOutput } from '../../runtime/store/stored-json.js';
import { describeStores } from '../support/describe-stores.js';

/**
 * `toStoredJson(v)` is what a jsonb round trip of `JSON.stringify(v)` gives back, on both
 * stores: the same values AND the same key order at every level — the property the runtime
 * relies on to hand keys, requests, conditions and matches the same outputs on the first attempt
 * as after a reload (DESIGN.md "Where features meet").
 */

/** Keys jsonb orders differently from insertion or JavaScript order: equal lengths, multi-byte, astral, integer-like. */
const key = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 4 }),
  fc.string({ unit: 'grapheme-ascii', maxLength: 3 }),
  // Equal UTF-8 lengths where UTF-16 and UTF-8 disagree: U+E000..U+FFFF against a surrogate pair.
  fc.constantFrom(
    'a',
    'b',
    'z',
    'aa',
    'ab',
    'ba',
    'é',
    'ß',
    'ｚ',
    'ｚa',
    '\uffffa',
    '\ue000b',
    '😀',
    '𝒜',
    'a😀',
    '10',
    '2',
    '01',
    '-1',
    '__proto__',
    'constructor',
    '',
  ),
  fc.constantFrom('ｚa', '\uffffa', '😀', '𝒜', 'aé', 'éa', 'aaaa'),
);
/** Numbers whose jsonb (numeric) text differs from JSON.stringify's: exponents, large integers, -0. */
const number = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
  fc.constantFrom(
    1e21,
    1e-7,
    2 ** 53 + 2,
    2 ** 60,
    0.1 + 0.2,
    Number.MAX_VALUE,
    Number.MIN_VALUE,
    -0,
    1.5e300,
    123456789.125,
  ),
);
const text = fc.string({ unit: 'grapheme', maxLength: 8 });
const { json } = fc.letrec((tie) => ({
  json: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    number,
    text,
    tie('array'),
    tie('object'),
  ),
  array: fc.array(tie('json'), { maxLength: 5 }),
  object: fc.dictionary(key, tie('json'), { maxKeys: 8 }),
}));
/** jsonb refuses U+0000 in text: such a value is never stored, so it is not generated. */
const storable = json.filter((value) => !JSON.stringify(value).includes('\\u0000'));

/** A value with its key order made visible, so that toEqual compares order as well as content. */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(shape);
  if (value !== null && typeof value === 'object')
    return Object.keys(value).map((k) => [k, shape((value as Record<string, unknown>)[k])]);
  return value;
}

describeStores('toStoredJson equals a jsonb round trip', (getStore) => {
  it('same values, same key order, for random JSON values', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(storable, { minLength: 1, maxLength: 20 }), async (values) => {
        const { rows } = await sql<{ v: unknown }>`
          SELECT t.v::jsonb AS v FROM unnest(${values.map((v) => JSON.stringify(v))}::text[]) WITH ORDINALITY AS t(v, i) ORDER BY t.i`.execute(
          getStore().db,
        );
        for (const [i, value] of values.entries()) {
          const mine = toStoredJson(value);
          expect(mine).toEqual(rows[i]!.v);
          expect(shape(mine)).toEqual(shape(rows[i]!.v));
        }
      }),
      { numRuns: 150 },
    );
  });

  it("the claim's steps object (jsonb_object_agg of step names) has the order withStoredOutput builds", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(key, { minLength: 1, maxLength: 8 }), async (names) => {
        const { rows } = await sql<{ v: Record<string, unknown> }>`
          SELECT jsonb_object_agg(t.n, t.i) AS v FROM unnest(${names}::text[]) WITH ORDINALITY AS t(n, i)`.execute(
          getStore().db,
        );
        let built: Readonly<Record<string, number>> = {};
        for (const [i, name] of names.entries()) built = withStoredOutput(built, name, i + 1) as Record<string, number>;
        expect(shape(built)).toEqual(shape(rows[0]!.v));
      }),
      { numRuns: 100 },
    );
  });
});

it('toStoredJson handles what JSON.stringify handles as JSON.stringify does: toJSON, Dates, undefined, boxed values, non-finite numbers', () => {
  const anything = fc.anything({
    withDate: true,
    withBoxedValues: true,
    withNullPrototype: true,
    withSparseArray: true,
    withObjectString: true,
    maxDepth: 4,
  });
  fc.assert(
    fc.property(
      fc.oneof(
        anything,
        fc.constantFrom(
          undefined,
          Number.NaN,
          -Infinity,
          -0,
          new Date(0),
          { toJSON: (k: string) => `at ${k}` },
          { a: undefined, b: () => 1 },
        ),
      ),
      (value) => {
        const text = JSON.stringify(value);
        const expected = text === undefined ? undefined : JSON.parse(text);
        expect(toStoredJson(value)).toEqual(expected);
      },
    ),
    { numRuns: 500 },
  );
  expect(() => toStoredJson({ amount: 1n })).toThrow(TypeError);
  expect(Object.keys(toStoredJson({ zeta: 1, a: 2, mid: 3, __proto__x: 0 }) as object)).toEqual([
    'a',
    'mid',
    'zeta',
    '__proto__x',
  ]);
  const proto = toStoredJson(JSON.parse('{"__proto__": {"x": 1}, "b": 2}')) as Record<string, unknown>;
  expect(Object.keys(proto)).toEqual(['b', '__proto__']);
  expect(Object.getPrototypeOf(proto)).toBe(Object.prototype);
});
