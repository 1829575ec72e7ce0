import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ALWAYS_CHECKED, checkOptions, integer, optionProblems, rule } from '../../dsl/option-checks.js';

/** The messages options schemas are reported with (dsl/option-checks.ts), whatever zod would say. */
const leaseOptions = z
  .object({
    concurrency: rule(integer().min(1), 'must be an integer >= 1').optional(),
    leaseMs: rule(z.number().gt(0), 'must be > 0').optional(),
    heartbeatMs: rule(z.number(), 'must be > 0 and < leaseMs').optional(),
    mode: rule(z.enum(['fast', 'safe']), "must be 'fast' or 'safe'").optional(),
  })
  .superRefine(({ leaseMs = 30_000, heartbeatMs = Math.floor(leaseMs / 3) }, ctx) => {
    if (typeof leaseMs !== 'number' || typeof heartbeatMs !== 'number' || (heartbeatMs > 0 && heartbeatMs < leaseMs))
      return;
    ctx.addIssue({
      code: 'custom',
      path: ['heartbeatMs'],
      message: `must be > 0 and < leaseMs (got ${heartbeatMs} with leaseMs ${leaseMs})`,
    });
  }, ALWAYS_CHECKED);

describe('optionProblems', () => {
  it('says each option once: its name, its rule and what was given, in the order the schema declares them', () => {
    expect(optionProblems(leaseOptions, { mode: 'quick', concurrency: 0.5, leaseMs: -1 })).toEqual([
      'concurrency must be an integer >= 1 (got 0.5)',
      'leaseMs must be > 0 (got -1)',
      'heartbeatMs must be > 0 and < leaseMs (got -1 with leaseMs -1)',
      "mode must be 'fast' or 'safe' (got quick)",
    ]);
    expect(optionProblems(leaseOptions, { concurrency: 2 ** 60, leaseMs: 9_000 })).toEqual([]);
  });

  it('runs a cross-option refinement even when another option has a problem of its own, and lets it replace the rule it overrides', () => {
    expect(optionProblems(leaseOptions, { concurrency: 1.5, leaseMs: 1 })).toEqual([
      'concurrency must be an integer >= 1 (got 1.5)',
      'heartbeatMs must be > 0 and < leaseMs (got 0 with leaseMs 1)',
    ]);
    expect(optionProblems(leaseOptions, { heartbeatMs: 'soon' })).toEqual([
      'heartbeatMs must be > 0 and < leaseMs (got soon)',
    ]);
  });

  it('names a nested option by its path, after the name of the object, in the style asked for', () => {
    const debounce = z.object({
      key: rule(z.string(), 'must be a string'),
      window: z.object({ ms: rule(z.number().gt(0), 'must be > 0') }),
    });
    expect(
      optionProblems(
        debounce,
        { key: 7, window: { ms: 0 } },
        { name: 'debounce', separator: ': ', show: JSON.stringify },
      ),
    ).toEqual(['debounce.key: must be a string (got 7)', 'debounce.window.ms: must be > 0 (got 0)']);
  });

  it('lets a rule speak for its whole option: a failure inside it is named by the option, with what was given for it', () => {
    const policy = z.object({
      catchUp: rule(
        z.union([z.literal('skip'), z.object({ all: z.object({ max: integer().max(10) }) })]),
        "use 'skip' or { all: { max: n } }",
      ),
    });
    expect(optionProblems(policy, { catchUp: { all: { max: 50 } } }, { show: JSON.stringify })).toEqual([
      'catchUp use \'skip\' or { all: { max: n } } (got {"all":{"max":50}})',
    ]);
  });

  it('shows an object given as JSON and a function by kind, and names the keys a strict object does not know', () => {
    const options = z.object({
      retry: rule(z.strictObject({ max: integer() }), 'must be { max: n }'),
      key: rule(z.string(), 'must be a string'),
    });
    expect(optionProblems(options, { retry: { max: 1, maxx: 2 }, key: () => 'k' })).toEqual([
      'retry must be { max: n } (got {"max":1,"maxx":2}; unknown: maxx)',
      'key must be a string (got a function)',
    ]);
  });

  it("falls back to zod's message, with what was given, for an option without a rule", () => {
    expect(optionProblems(z.object({ n: z.number() }), { n: 'x' })).toEqual([
      'n Invalid input: expected number, received string (got x)',
    ]);
  });
});

describe('checkOptions', () => {
  it('passes what is valid and throws what the caller makes of the problems: the lines and the problems themselves', () => {
    expect(() => checkOptions(leaseOptions, { leaseMs: 3_000 }, () => new Error('unreached'))).not.toThrow();
    expect(() =>
      checkOptions(leaseOptions, { leaseMs: 0 }, (lines) => new TypeError(`Invalid options: ${lines.join('; ')}.`)),
    ).toThrow(
      new TypeError(
        'Invalid options: leaseMs must be > 0 (got 0); heartbeatMs must be > 0 and < leaseMs (got 0 with leaseMs 0).',
      ),
    );
    expect(() =>
      checkOptions(
        leaseOptions,
        { concurrency: 0 },
        (_lines, [first]) => new RangeError(`Invalid ${first!.name}: ${first!.says} [${String(first!.given)}]`),
      ),
    ).toThrow(new RangeError('Invalid concurrency: must be an integer >= 1 (got 0) [0]'));
  });
});
