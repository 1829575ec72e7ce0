import { createHash } from 'node:crypto';
import { PREPARED_MARK } from '../prepared.js';

/**
 * Distinct prepared texts named per process at most. The marked statements come in a few dozen
 * shapes; this bound only keeps a statement marked by mistake (a text that varies with its
 * values) from growing every connection's set of prepared statements without end — past it,
 * new texts run unnamed, as before.
 */
export const MAX_PREPARED_TEXTS = 256;

const names = new Map<string, string>();

/**
 * The statement name a marked text runs under: `lf_` and a digest of the text, so one name never
 * stands for two texts (node-postgres refuses that) and every process names a text alike.
 * `undefined` for an unmarked text, or once {@link MAX_PREPARED_TEXTS} texts are named.
 */
export function preparedStatementName(text: string): string | undefined {
  if (!text.startsWith(PREPARED_MARK)) return undefined;
  const known = names.get(text);
  if (known !== undefined || names.size >= MAX_PREPARED_TEXTS) return known;
  const name = `lf_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
  names.set(text, name);
  return name;
}
