/**
 * Diagnostic codes. LF001–LF007 are the key and version rules (DESIGN.md "Codegen", the table of docs/reference/diagnostics.md);
 * LF002–LF004 check every function the runtime evaluates for a step, and a schedule's input, as
 * they check keys. LF008 reports a declaration that codegen cannot read statically (it must never guess about a key).
 */
export const DIAGNOSTIC_CODES = {
  LF001: 'an external, transactional, child or forEach step has no key',
  LF002:
    "a key or another step function (request, when, sleep, match, items, child input, partition key) or a schedule's input reads a non-deterministic source",
  LF003: 'a key or another step function reads a step that does not come before it',
  LF004:
    "a key or another step function reads something that is neither input nor an earlier step output (a schedule's input: anything but its scheduledAt and constants)",
  LF005:
    "a key depends on neither input nor step outputs (an error for an external step's key and its compensation's: the provider sees it)",
  LF006: 'duplicate workflow, step, compensation or event names',
  LF007:
    'a workflow version changed without a version bump (steps, schemas, keys, requests, conditions, waits, children, queue names, partition keys and compensations)',
  LF008: 'a workflow declaration codegen cannot read statically',
  LF009: 'a workflow version in the manifest is no longer declared (and was not retired)',
  // The handler rules: what the handlers bound through the generated contracts do (codegen/analysis/handlers/).
  LF010: 'a transactional handler writes through something other than ctx.tx',
  LF011: 'a step handler writes to the database or calls an external system',
  LF012: "an external handler's perform never reads ctx.key",
  LF013: 'a forEach key does not read its item',
  // Compensations (a step's `compensate`).
  LF014: "a compensation's key is the same as the key of the step it undoes",
  LF015: 'an effect step declares no compensation in a workflow that has compensations',
  // What a key's value is (codegen/analysis/key-values.ts).
  LF016:
    'a key or another step function turns into text a value that is not a primitive (an object, a Date, a Promise)',
  LF017: 'a key reads the output of a conditional step without saying what to use when the step was skipped',
  // The escape hatch (codegen/validation/apply-suppressions.ts): not a rule over the model, a check of the comments.
  LF018:
    'a `// ledgerflow-ignore` comment is malformed, has no reason, names a code that does not exist or cannot be suppressed, or suppresses nothing',
} as const;

export type DiagnosticCode = keyof typeof DIAGNOSTIC_CODES;

export type Severity = 'error' | 'warning';

/** One problem, as data: collected during a run and reported once at the end. */
export interface Diagnostic {
  readonly code: DiagnosticCode;
  readonly severity: Severity;
  /** Relative to the codegen root, forward slashes. */
  readonly file: string;
  readonly line: number;
  readonly col: number;
  /** Says what is wrong and what to do about it. */
  readonly message: string;
}

export function compareDiagnostics(a: Diagnostic, b: Diagnostic): number {
  if (a.file !== b.file) return a.file < b.file ? -1 : 1;
  return (
    a.line - b.line ||
    a.col - b.col ||
    (a.code < b.code ? -1 : a.code > b.code ? 1 : 0) ||
    (a.message < b.message ? -1 : a.message > b.message ? 1 : 0)
  );
}

export function hasErrors(diagnostics: readonly Diagnostic[]): boolean {
  return diagnostics.some((d) => d.severity === 'error');
}
