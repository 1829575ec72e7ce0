import { createHash } from 'node:crypto';
import { PREPARED_MARK } from '../prepared.js';

/**
 * Distinct prepared texts one store names at most. The marked statements come in a few dozen
 * shapes; this bound only keeps a statement marked by mistake (a text that varies with its
 * values) from growing every connection's set of prepared statements without end — past it,
 * new texts run unnamed, as before.
 */
export const MAX_PREPARED_TEXTS = 256;

/**
 * Names marked texts (see `prepared()`): `lf_` and a digest of the text, so one name never stands
 * for two texts (node-postgres refuses that) and every process names a text alike. The returned
 * function gives `undefined` for an unmarked text, or for a new text once `max` are named.
 */
export function statementNamer(max: number = MAX_PREPARED_TEXTS): (text: string) => string | undefined {
  // Found by length, then compared: the texts come fresh from the query compiler every time, and
  // a Map keyed by the text would hash all of its kilobytes on every statement before comparing.
  const byLength = new Map<number, Array<{ readonly text: string; readonly name: string }>>();
  let named = 0;
  return (text) => {
    if (!text.startsWith(PREPARED_MARK)) return undefined;
    const sameLength = byLength.get(text.length);
    const known = sameLength?.find((entry) => entry.text === text)?.name;
    if (known !== undefined || named >= max) return known;
    const name = `lf_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
    if (sameLength === undefined) byLength.set(text.length, [{ text, name }]);
    else sameLength.push({ text, name });
    named += 1;
    return name;
  };
}
