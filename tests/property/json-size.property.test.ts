import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JsonDepthError, jsonByteLength } from '../../runtime/limits/json-size.js';
import { fitErrorRecord } from '../../runtime/limits/payload-limits.js';

/**
 * The size check measures a value's JSON without building it (runtime/limits/json-size.ts); it
 * must count exactly what JSON.stringify writes, or an input the limit admits could be refused
 * (or the reverse). Error records over their limit are cut until they fit, never refused.
 */
const text = fc.string({ unit: 'binary', maxLength: 40 }); // lone surrogates and control characters included
const leaf = fc.oneof(
  text,
  fc.double(),
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.constant(undefined),
  fc.date({ noInvalidDate: true }),
  fc.constant(() => 1),
);
const value = fc.letrec((tie) => ({
  node: fc.oneof(
    { depthSize: 'small' },
    leaf,
    fc.array(tie('node'), { maxLength: 5 }),
    fc.dictionary(text, tie('node'), { maxKeys: 5 }),
  ),
})).node;

describe('jsonByteLength', () => {
  it('property: equals the UTF-8 length of JSON.stringify, escapes, toJSON and left-out members included', () => {
    fc.assert(
      fc.property(value, (v) => {
        const json = JSON.stringify(v) ?? 'null';
        expect(jsonByteLength(v, 1_000)).toBe(Buffer.byteLength(json, 'utf8'));
      }),
      { numRuns: 2_000 },
    );
  });

  it('throws JsonDepthError past the depth limit, without recursion, for 100 000 levels', () => {
    let deep: unknown = [];
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    expect(() => jsonByteLength(deep, 1_000)).toThrow(JsonDepthError);
    expect(() => JSON.stringify(deep)).toThrow(RangeError);
    let fits: unknown = [];
    for (let i = 1; i < 1_000; i++) fits = [fits];
    expect(jsonByteLength(fits, 1_000)).toBe(2_000);
  });
});

describe('fitErrorRecord', () => {
  const record = fc.record({
    name: text,
    message: fc.string({ unit: 'binary', maxLength: 5_000 }),
    stack: fc.string({ maxLength: 5_000 }),
    issues: fc.array(fc.string({ maxLength: 100 }), { maxLength: 200 }),
    step: fc.string({ maxLength: 50 }),
    attempt: fc.nat(),
  });

  it('property: returns a record that fits, unchanged when it already did, marked `truncated` when not', () => {
    fc.assert(
      fc.property(record, fc.integer({ min: 1_024, max: 8_192 }), (error, limit) => {
        const size = Buffer.byteLength(JSON.stringify(error));
        const fitted = fitErrorRecord(error, limit);
        expect(Buffer.byteLength(JSON.stringify(fitted))).toBeLessThanOrEqual(limit);
        if (size <= limit) {
          expect(fitted).toBe(error);
        } else {
          expect((fitted as typeof error & { truncated: unknown }).truncated).toEqual({ bytes: size, limit });
          expect(fitted.attempt).toBe(error.attempt);
          // Cut strings keep their beginning.
          expect(
            error.message.startsWith(
              fitted.message.replace(/… \[\d+ more characters cut, over the error record limit\]$/, ''),
            ),
          ).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });
});
