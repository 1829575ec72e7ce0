import { z } from 'zod';

/**
 * Options objects checked by zod schemas, with the messages a person can act on: the option's
 * name, what is allowed and what was given (`concurrency must be an integer >= 1 (got 0)`), not
 * zod's own wording. Shared by the DSL and the runtime (which imports dsl/, never the reverse).
 *
 * A schema names what each option allows with {@link rule}; a rule that reads several options
 * (`heartbeatMs < leaseMs`) is a refinement whose message is the whole sentence after the name,
 * given value included, with the option's path:
 *
 * @example
 * const schema = z.object({
 *   concurrency: rule(integer().min(1), 'must be an integer >= 1').optional(),
 * });
 * checkOptions(schema, options, (problems) => new TypeError(`Invalid worker options: ${problems.join('; ')}.`));
 *
 * The parse only checks: callers keep the object they were given (no key is stripped, no
 * default filled in), so that a schema changes nothing but how a wrong option is reported.
 */

/** What each ruled schema allows, in words: a registry of this module's own, not zod's global one. */
const rules = z.registry<{ readonly rule: string }>();

/** Registers `words` (`'must be > 0'`) as what `schema` allows; returns the same schema. */
export function rule<T extends z.ZodType>(schema: T, words: string): T {
  rules.add(schema, { rule: words });
  return schema;
}

/**
 * The params of a cross-option refinement (`superRefine(fn, ALWAYS_CHECKED)`): it runs even when
 * an option already has a problem of its own (zod skips it then), so that every problem is told
 * at once. It must check the types of what it reads itself. Typed by its shape, not as zod's
 * `$ZodSuperRefineParams`: that name is not in every zod of the peer range (>=4.0.0), and this
 * declaration ships in the package's types. A zod whose refinements take no params ignores it:
 * every problem is still refused, fewer are told at once.
 */
export const ALWAYS_CHECKED: { readonly when: () => boolean } = { when: () => true };

/**
 * A whole number, as `Number.isInteger` says. Not `z.number().int()`: that one ends the parse
 * when it fails (no {@link ALWAYS_CHECKED} refinement runs after it) and refuses integers past
 * 2^53, which the checks it replaces let through.
 */
export function integer(): z.ZodNumber {
  return z.number().multipleOf(1);
}

/** One option that breaks its rule. */
export interface OptionProblem {
  /** The option's dotted path (`retention.batchSize`), after the style's `name` prefix if any; '' for the value itself. */
  readonly name: string;
  /** The rest of the sentence: `must be > 0 (got -1)`, or a refinement's message as written. */
  readonly says: string;
  /** The value given for the option (a refinement's: what it reported, if anything). */
  readonly given: unknown;
}

export interface OptionStyle {
  /** The name of the object checked, prefixed to every path (`debounce` → `debounce.key`), and used alone for the object itself. */
  readonly name?: string;
  /** Between an option's name and what it says: `' '` (the default) or `': '`. */
  readonly separator?: string;
  /** How a given value is shown after "got"; default: as `String` does, objects as JSON. */
  readonly show?: (value: unknown) => string;
}

/**
 * Every problem of `value` under `schema`, in the order the schema declares its options; empty
 * when it passes. One per option and check that fails: `integer().min(1)` given 0.5 fails two
 * checks said by one rule, and a refinement's problem with an option (`maxWaitMs: only for keep
 * 'last'`) replaces what the option's own rule says of it.
 */
function problemsOf(schema: z.ZodType, value: unknown, style: OptionStyle = {}): OptionProblem[] {
  const result = schema.safeParse(value, { reportInput: true });
  if (result.success) return [];
  const show = style.show ?? shown;
  const byRule = new Map<string, number>();
  const problems: Array<(OptionProblem & { readonly at: number }) | undefined> = [];
  const nameOf = (path: readonly PropertyKey[]): string => {
    const dotted = path.map(String).join('.');
    return style.name === undefined ? dotted : dotted === '' ? style.name : `${style.name}.${dotted}`;
  };
  for (const issue of result.error.issues) {
    const at = order(schema, issue.path[0]);
    if (issue.code === 'custom') {
      const name = nameOf(issue.path);
      const ruled = byRule.get(name);
      if (ruled !== undefined) problems[ruled] = undefined;
      problems.push({ name, says: issue.message, given: issue.input, at });
      continue;
    }
    // The rule speaks for the option it is on, whatever part of it failed: `catchUp`, not `catchUp.all.max`.
    const ruled = ruleAt(schema, issue.path);
    const path = ruled === undefined ? issue.path : issue.path.slice(0, ruled.depth);
    const name = nameOf(path);
    if (byRule.has(name)) continue;
    const given = ruled === undefined || ruled.depth === issue.path.length ? issue.input : valueAt(value, path);
    byRule.set(name, problems.length);
    // An object with a key its schema does not know says which.
    const unknown = issue.code === 'unrecognized_keys' ? `; unknown: ${issue.keys.join(', ')}` : '';
    problems.push({ name, says: `${ruled?.words ?? issue.message} (got ${show(given)}${unknown})`, given, at });
  }
  // A refinement's problems come after every option's; each is told where its option is declared.
  return problems
    .filter((p) => p !== undefined)
    .sort((a, b) => a.at - b.at)
    .map(({ name, says, given }) => ({ name, says, given }));
}

/** A given value as a problem shows it: an object as JSON (not `[object Object]`), a function by kind. */
function shown(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  if (typeof value !== 'object' || value === null) return String(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** {@link problemsOf} as lines: `name must be … (got …)`, with the style's separator. */
export function optionProblems(schema: z.ZodType, value: unknown, style: OptionStyle = {}): string[] {
  return problemsOf(schema, value, style).map((problem) => lineOf(problem, style));
}

/**
 * Checks `value` against `schema` and throws what `fail` makes of its problems: the lines
 * (`name must be … (got …)`) and, for a caller that words them otherwise, the problems themselves.
 */
export function checkOptions(
  schema: z.ZodType,
  value: unknown,
  fail: (problems: readonly string[], parts: readonly OptionProblem[]) => Error,
  style: OptionStyle = {},
): void {
  const parts = problemsOf(schema, value, style);
  if (parts.length > 0)
    throw fail(
      parts.map((problem) => lineOf(problem, style)),
      parts,
    );
}

function lineOf(problem: OptionProblem, style: OptionStyle): string {
  return problem.name === '' ? problem.says : `${problem.name}${style.separator ?? ' '}${problem.says}`;
}

/** Where an object schema declares `key`: the order its problems are told in (-1 for the object itself). */
function order(schema: z.ZodType, key: PropertyKey | undefined): number {
  if (key === undefined) return -1;
  let node: z.core.$ZodType = schema;
  while ('innerType' in node._zod.def) node = node._zod.def.innerType as z.core.$ZodType;
  const def = node._zod.def as z.core.$ZodTypeDef & { shape?: Record<PropertyKey, unknown> };
  const index = def.type === 'object' && def.shape !== undefined ? Object.keys(def.shape).indexOf(String(key)) : -1;
  return index === -1 ? Number.MAX_SAFE_INTEGER : index;
}

/** The rule nearest to the value at `path` (the deepest ruled schema on the way down to it), and how deep it is. */
function ruleAt(
  schema: z.ZodType,
  path: readonly PropertyKey[],
): { readonly words: string; readonly depth: number } | undefined {
  let node: z.core.$ZodType | undefined = schema;
  let found: { readonly words: string; readonly depth: number } | undefined;
  let at = 0;
  while (node !== undefined) {
    const words = rules.get(node as z.ZodType)?.rule;
    if (words !== undefined) found = { words, depth: at };
    const def = node._zod.def as z.core.$ZodTypeDef & Record<string, unknown>;
    if ('innerType' in def)
      node = def.innerType as z.core.$ZodType; // optional, nullable, default, readonly …
    else if (def.type === 'pipe') node = def.in as z.core.$ZodType;
    else if (at < path.length && def.type === 'object')
      node = (def.shape as Record<PropertyKey, z.core.$ZodType>)[path[at++]!];
    else if (at < path.length && def.type === 'array') {
      node = def.element as z.core.$ZodType;
      at++;
    } else node = undefined;
  }
  return found;
}

function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  let at = value;
  for (const key of path)
    at = typeof at === 'object' && at !== null ? (at as Record<PropertyKey, unknown>)[key] : undefined;
  return at;
}
