import type { z } from 'zod';
import type { AnyWorkflow } from '../../dsl/workflow.js';
import { LedgerflowError, ValidationError } from '../errors.js';
import { payloadJson, type PayloadLimits } from '../limits/payload-limits.js';

/**
 * One line per problem, `path: message`, with array indices in brackets
 * (`items[0].sku: Invalid input: expected string, received number`); `(input)` for the root.
 */
export function describeIssues(issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.map((issue) => `${formatPath(issue.path)}: ${issue.message}`);
}

function formatPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(input)';
  return path
    .map((segment, i) => (typeof segment === 'number' ? `[${segment}]` : `${i === 0 ? '' : '.'}${String(segment)}`))
    .join('');
}

/**
 * Parses a start input with the workflow's schema and returns the JSON text to store, refused
 * over `limits.maxInputBytes` or nested too deep. Nothing touches the database before this
 * succeeds. {@link parseInputSchema} and {@link inputJson} are its two halves, for a caller that
 * reads the limits in between.
 */
export function parseStartInput(workflow: AnyWorkflow, input: unknown, limits: PayloadLimits): string {
  return inputJson(workflow, parseInputSchema(workflow, input), limits);
}

/** The input as the workflow's schema parses it; a ValidationError listing every problem otherwise. */
export function parseInputSchema(workflow: AnyWorkflow, input: unknown): unknown {
  const parsed = workflow.input.safeParse(input);
  if (!parsed.success) {
    const issues = describeIssues(parsed.error.issues);
    throw new ValidationError(
      `Invalid input for ${describeWorkflow(workflow)}:\n${issues.map((i) => `  - ${i}`).join('\n')}\nNothing was written.`,
      issues,
    );
  }
  return parsed.data;
}

/**
 * The JSON text of a parsed input: its size and depth checked first (without building the text,
 * so a 100 MB input costs no second copy and a 100 000-deep one no stack overflow), then the
 * characters jsonb cannot store.
 */
export function inputJson(workflow: AnyWorkflow, data: unknown, limits: PayloadLimits): string {
  const where = describeWorkflow(workflow);
  let json: string | undefined;
  try {
    json = payloadJson('run input', where, data, limits);
  } catch (error) {
    if (error instanceof LedgerflowError) throw error;
    const reason = error instanceof Error ? error.message : String(error);
    throw new ValidationError(`The input for ${where} cannot be stored as JSON: ${reason}.`, [`(input): ${reason}`]);
  }
  if (json === undefined) {
    throw new ValidationError(`The input for ${where} parsed to undefined, which cannot be stored as JSON.`, [
      '(input): parsed to undefined',
    ]);
  }
  const unstorable = unstorableStrings(data, []);
  if (unstorable.length > 0) {
    throw new ValidationError(
      `Invalid input for ${where}:\n${unstorable.map((i) => `  - ${i}`).join('\n')}\n` +
        'PostgreSQL cannot store these characters in jsonb; remove or replace them. Nothing was written.',
      unstorable,
    );
  }
  return json;
}

function describeWorkflow(workflow: AnyWorkflow): string {
  return `workflow "${workflow.name}" v${workflow.version}`;
}

/** U+0000, and UTF-16 surrogates without their pair: valid in a JS string, refused by jsonb. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: U+0000 is what it looks for (jsonb cannot store it).
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function unstorableStrings(value: unknown, path: PropertyKey[]): string[] {
  const problem = (at: PropertyKey[], what: string): string =>
    `${formatPath(at)}: ${what} contains U+0000 or an unpaired surrogate, which PostgreSQL cannot store`;
  if (typeof value === 'string') return UNSTORABLE.test(value) ? [problem(path, 'the string')] : [];
  if (Array.isArray(value)) return value.flatMap((item, i) => unstorableStrings(item, [...path, i]));
  if (typeof value === 'object' && value !== null) {
    return Object.entries(value).flatMap(([key, item]) => [
      ...(UNSTORABLE.test(key) ? [problem([...path, key], 'the key')] : []),
      ...unstorableStrings(item, [...path, key]),
    ]);
  }
  return [];
}

/**
 * The longest dedupe key: what a `child`/`forEach` key may return, too (it becomes the child's).
 * Here with the rest of a start's checks, which the children executor shares
 * (worker/executors/children-executor.ts).
 */
export const MAX_DEDUPE_KEY_LENGTH = 1_000;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Run ids are uuids; checking here turns a driver's cast error into a message about the argument. */
export function assertRunId(runId: string, what = 'run id'): void {
  if (!UUID.test(runId)) {
    throw new ValidationError(`The ${what} "${runId}" is not a UUID (e.g. 0b6c3f9e-4a4d-4e39-9f55-2a1d0c8e7b21).`, [
      `${what}: not a UUID`,
    ]);
  }
}
