import { createHash } from 'node:crypto';
import { expect, it } from 'vitest';
import { requestHash } from '../../runtime/worker/request-hash.js';
import { stableJson } from '../../runtime/store/stable-json.js';

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
