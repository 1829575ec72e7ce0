import type { z } from 'zod';
import type { StepDefinition } from '../../dsl/workflow.js';
import { PayloadTooLargeError } from '../errors.js';
import { toStoredJson } from '../store/stored-json.js';
import type { Json } from '../store/tables.js';
import { payloadJson, type PayloadLimits } from './payload-limits.js';

/*
 * The one check of a step output before it is recorded, whoever records it: the worker (a
 * handler's return, or the provider's answer to the worker's own lookup), the reconciler (the
 * provider's answer to a pass's lookup) and an operator (`resolve --found`, the client, the
 * dashboard). The step's schema first, then the size limit (`maxOutputBytes`) and depth of its
 * JSON: a limit that one path skipped would be no limit. What a failed check means is each
 * path's to say (DESIGN.md "Size limits"); none of them records the value.
 */

/** What {@link checkRecordedOutput} found. */
export type RecordedOutputCheck =
  /** The output as it is recorded: parsed by the schema, in its stored (jsonb) form. */
  | { readonly ok: true; readonly output: Json }
  /** The step's schema refuses it. */
  | { readonly ok: false; readonly problem: 'schema'; readonly issues: readonly z.core.$ZodIssue[] }
  /** Its JSON is over the output limit. */
  | { readonly ok: false; readonly problem: 'too-large'; readonly error: PayloadTooLargeError }
  /** It cannot be stored as JSON: nested too deep, or JSON.stringify threw or gave nothing. */
  | { readonly ok: false; readonly problem: 'unstorable'; readonly reason: string };

/**
 * Checks a step output against its step's schema and the output size limit; returns it as it
 * would be recorded, or what is wrong with it. Never throws for a bad value.
 *
 * @example
 * const checked = checkRecordedOutput(step, 'payout', found.output, await limits.current());
 * if (!checked.ok && checked.problem === 'too-large') throw checked.error;
 */
export function checkRecordedOutput(
  step: Pick<StepDefinition, 'name' | 'output'>,
  workflowName: string,
  value: unknown,
  limits: PayloadLimits,
): RecordedOutputCheck {
  const parsed = (step.output as z.ZodType).safeParse(value);
  if (!parsed.success) return { ok: false, problem: 'schema', issues: parsed.error.issues };
  let json: string | undefined;
  try {
    json = payloadJson('step output', `step "${step.name}" of workflow "${workflowName}"`, parsed.data, limits);
  } catch (error) {
    if (error instanceof PayloadTooLargeError) return { ok: false, problem: 'too-large', error };
    return { ok: false, problem: 'unstorable', reason: error instanceof Error ? error.message : String(error) };
  }
  // The value kept is built from the data itself, in its stored (jsonb) form: the run goes on with
  // what every later claim reads back, whichever path recorded it. Both give undefined for
  // undefined, a function or a symbol.
  const output = json === undefined ? undefined : toStoredJson(parsed.data);
  if (output === undefined) return { ok: false, problem: 'unstorable', reason: 'it has no JSON form' };
  return { ok: true, output };
}
