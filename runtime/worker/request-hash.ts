import * as crypto from 'node:crypto';
import { stableJson } from '../store/stable-json.js';

/*
 * The request hash of the ledger: an effect step's request, reduced to the digest its ledger row
 * keeps so that a retry under the same key with another request is a conflict. Stateless.
 */

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
