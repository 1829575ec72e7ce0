import type { Diagnostic } from '../../model/diagnostic.js';
import type { UnstableText } from '../../model/key-values.js';
import type { Rule } from '../rule.js';
import { checkedFunctions, wordingOf } from '../step-functions.js';

/** What the text of each kind of value is, what that does to a key, and what to write instead (given the value's text). */
const BECOMES: Readonly<
  Record<UnstableText, { readonly what: string; readonly text: string; readonly fix: (text: string) => string }>
> = {
  object: {
    what: 'an object',
    text: 'becomes "[object Object]" — the same text for every run, whatever the object holds, so runs that should differ share one value',
    fix: (text) => `use the field that identifies it (e.g. \`\${${text}.id}\`)`,
  },
  'array-of-objects': {
    what: 'a list of objects',
    text: 'becomes "[object Object],[object Object]…", which tells runs apart only by the number of elements',
    fix: (text) => `join the field that identifies each element (e.g. \`\${${text}.map((e) => e.id).join(',')}\`)`,
  },
  date: {
    what: 'a Date',
    text: "becomes a text in the worker's time zone, which can differ between workers, so a retry on another worker can compute another value",
    fix: (text) => `use ${text}.toISOString(), .getTime() or the UTC getters`,
  },
  promise: {
    what: 'a Promise (the result of an async function, not awaited)',
    text: 'becomes "[object Promise]" — the same text for every run, so runs that should differ share one value',
    fix: () => 'compute the value synchronously, or in an earlier step whose output this function reads',
  },
};

/**
 * LF016: a key — and every other function the runtime evaluates for a step — that turns a value
 * into text (a template literal, `+` with text, `String()`, `.toString()`, `.join()`) must turn a
 * primitive (a string, number, bigint, boolean, null or undefined, a literal or enum) or a list of
 * them into text: an object becomes "[object Object]", a Promise "[object Promise]" — one key for
 * every run, however different — and a Date a text that depends on the worker's time zone.
 * Shapes come from the input's and the outputs' zod schemas; what codegen cannot tell is never reported.
 */
export const objectInKey: Rule = (input) => {
  const diagnostics: Diagnostic[] = [];
  for (const checked of checkedFunctions(input)) {
    const conversions = checked.fn.values?.conversions ?? [];
    if (conversions.length === 0) continue;
    const wording = wordingOf(checked);
    for (const conversion of conversions) {
      const becomes = BECOMES[conversion.becomes];
      diagnostics.push({
        code: 'LF016',
        severity: 'error',
        ...conversion.at,
        message:
          `${wording.subject} turns \`${conversion.text}\`, ${becomes.what}, into text (${conversion.via}): it ${becomes.text}; ` +
          `${becomes.fix(conversion.text)}.`,
      });
    }
  }
  return diagnostics;
};
