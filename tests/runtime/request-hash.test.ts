import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { requestHash } from '../../runtime/worker/request-hash.js';
import { sortedJson, stableJson } from '../../runtime/store/stable-json.js';

// The ledger compares stored request hashes with new ones: however it is computed, the digest
// stays sha256 of the key-sorted JSON, in hex.
it('requestHash is the hex sha256 of the key-sorted JSON, undefined properties left out', () => {
  const request = { b: 1, a: [{ d: 'é', c: undefined }], at: new Date(0) };
  expect(stableJson(request)).toBe('{"a":[{"d":"é"}],"at":"1970-01-01T00:00:00.000Z","b":1}');
  expect(requestHash(request)).toBe(
    createHash('sha256').update('{"a":[{"d":"é"}],"at":"1970-01-01T00:00:00.000Z","b":1}').digest('hex'),
  );
  expect(requestHash(undefined)).toBe(createHash('sha256').update('null').digest('hex'));
});

// The ledger keeps hashes across releases: the direct writer of plain values must give exactly the
// text of the definition (sort every object's keys into a new object, then JSON.stringify).
const definition = sortedJson;

it('stableJson gives the definition’s text for any value (array-index keys, dates, holes, undefined, NaN)', () => {
  fc.assert(
    fc.property(fc.anything({ withDate: true, withNullPrototype: true, withSparseArray: true }), (value) => {
      expect(stableJson(value)).toBe(definition(value));
    }),
    { numRuns: 2000 },
  );
  const edge = { 10: 'ten', 2: 'two', b: [1, undefined, -0], a: { z: undefined, y: Number.NaN }, ['é']: 'x' };
  expect(stableJson(edge)).toBe(definition(edge));
  expect(stableJson(edge)).toBe('{"2":"two","10":"ten","a":{"y":null},"b":[1,null,0],"é":"x"}');
});
