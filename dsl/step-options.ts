import { z } from 'zod';
import { integer, rule, type OptionProblem } from './option-checks.js';

/*
 * What the builder (workflow.ts) accepts in a declaration's options and fills in when one is
 * absent: the time limits' defaults, and the zod schemas it checks the options of a step, a
 * compensation, a `waitFor`, a `forEach`, a queue use and a workflow with — each problem thrown
 * as `Invalid <option> in <where>: …`. The options' types are in step-configs.ts.
 */

export const DEFAULT_PERFORM_TIMEOUT_MS = 30_000;
export const DEFAULT_STEP_TIMEOUT_MS = 300_000;
export const DEFAULT_TRANSACTIONAL_TIMEOUT_MS = 60_000;

const positiveMs = rule(z.number().gt(0), 'must be > 0');
const fn = (signature: string) =>
  z.custom<(...args: never[]) => unknown>((value) => typeof value === 'function', `must be a function ${signature}`);

/** A step's `when` and time limits, as the step will use them (defaults filled in). */
export const stepConfigSchema = z.object({
  when: fn('({ input, steps }) => boolean').optional(),
  performTimeoutMs: positiveMs,
  timeoutMs: positiveMs,
});

/** A compensation's `request` and time limits, as it will use them. */
export const compensationConfigSchema = z.object({
  request: fn('({ input, steps }) => value').optional(),
  performTimeoutMs: positiveMs,
  timeoutMs: positiveMs,
});

export const waitForConfigSchema = z.object({
  timeoutMs: positiveMs.optional(),
  match: fn('({ input, steps }) => string').optional(),
});

export const forEachConfigSchema = z.object({
  items: fn('({ input, steps }) => items'),
  key: fn('({ item, input, steps }) => string'),
  input: fn('({ item, input, steps }) => childInput'),
  concurrency: rule(z.union([integer().min(1), z.literal(Infinity)]), 'must be an integer >= 1').optional(),
});

export const queueUseSchema = z.object({ partitionKey: fn('({ input, steps }) => string').optional() });

export const workflowOptionsSchema = z.object({
  version: rule(integer().min(1), 'must be an integer >= 1'),
  timeoutMs: positiveMs.optional(),
});

/** A step config's first problem, thrown as `Invalid <option> in <where>: …` (as a declaration's other problems are). */
export function invalidIn(where: string) {
  return (_lines: readonly string[], [first]: readonly OptionProblem[]): TypeError =>
    new TypeError(`Invalid ${first!.name} in ${where}: ${first!.says}.`);
}
