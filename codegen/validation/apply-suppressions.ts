// The escape hatch: `// ledgerflow-ignore LF005: reason` on the line above a diagnostic's line
// takes the diagnostics of that code on that line out of the report. A stage after the rules,
// over the collected diagnostics (data with a source location) and the comments analysis read:
// no rule knows about it. It stays visible — every suppression in effect is listed in REVIEW.md
// and in `--format json` — and it stays honest: a comment without a reason, with a code that does
// not exist or may not be suppressed, or that suppresses nothing is itself an error (LF018).

import { DIAGNOSTIC_CODES, type Diagnostic, type DiagnosticCode } from '../model/diagnostic.js';
import { compareLocations, type SourceLocation } from '../model/source-location.js';
import type { Suppression, SuppressionComment } from '../model/suppression.js';
import { stepsAndCompensations, type AnalysisResult } from '../model/workflow-model.js';

/** The code of a malformed, unknown, unsuppressable or stale suppression comment. */
export const SUPPRESSION_CODE = 'LF018';

/**
 * Per code, null when it may be suppressed, else why not (the end of LF018's message). Only
 * judgement calls may be: what a static analysis of a function's body concludes, which a human
 * can know better (a key the analysis thinks reads the clock, a key deliberately the same for
 * every run), and an effect deliberately left without a compensation (LF015: a receipt, an audit
 * row that should stay). A structural fact — a missing key, duplicate names, an unbumped version, a
 * declaration codegen cannot read — is true whatever anyone knows, and a run would go wrong on
 * it: those are fixed, never suppressed. Exhaustive: a new code does not compile without a decision.
 */
export const SUPPRESSIBLE: Readonly<Record<DiagnosticCode, string | null>> = {
  LF001: 'an effect step without a key has nothing the ledger can dedupe by — give it a key',
  LF002: null,
  LF003:
    'a step that does not come before has no output yet when the key is evaluated, on every run — read an earlier step',
  LF004: null,
  LF005: null,
  LF006: 'two declarations under one name cannot both be addressed — rename one',
  LF007: 'runs in flight depend on the version as generated — bump the version or revert the change',
  LF008: 'codegen cannot check what it cannot read — write the declaration so that it can',
  LF009: 'a version that runs may still need must be declared — declare it again or retire it with --retire',
  LF010: null,
  LF011: null,
  LF012: null,
  LF013: null,
  LF014: "the undo would share its step's key on every run — give the compensation a key of its own",
  LF015: null,
  LF016: null,
  LF017: null,
  LF018: 'a suppression comment is checked, not suppressed — fix or remove it',
};

const HOW = '`// ledgerflow-ignore LF005: why this diagnostic does not apply here`, on the line above the diagnostic';

/**
 * Takes the diagnostics each valid comment suppresses out of `diagnostics` and adds an LF018 for
 * each comment that is malformed, has no reason, names an unknown or unsuppressable code, or
 * suppresses nothing (a stale suppression would hide the next problem on its line; not said in a
 * file with an LF008, whose unread declarations were not checked). Returns the
 * diagnostics left (unsorted) and the suppressions in effect, sorted by location.
 */
export function applySuppressions(
  diagnostics: readonly Diagnostic[],
  analysis: AnalysisResult,
): { diagnostics: Diagnostic[]; suppressions: Suppression[] } {
  const comments = [...(analysis.suppressionComments ?? [])].sort((a, b) => compareLocations(a.location, b.location));
  const problems: Diagnostic[] = [];
  const suppressed = new Set<Diagnostic>();
  const suppressions: Suppression[] = [];
  for (const comment of comments) {
    const problem = commentProblem(comment);
    if (problem !== null) {
      problems.push(error(comment.location, problem));
      continue;
    }
    const code = comment.code as DiagnosticCode;
    const matched = diagnostics.filter(
      (d) => d.code === code && d.file === comment.location.file && d.line === comment.target,
    );
    if (matched.length === 0) {
      // A declaration codegen could not read (LF008) was not checked: its comments cannot be told stale yet.
      if (diagnostics.some((d) => d.code === 'LF008' && d.file === comment.location.file)) continue;
      problems.push(
        error(
          comment.location,
          `ledgerflow-ignore ${code} suppresses nothing: no ${code} is reported on line ${comment.target}. ` +
            'Remove the comment — a stale suppression would hide the next problem on that line.',
        ),
      );
      continue;
    }
    for (const d of matched) suppressed.add(d);
    suppressions.push({
      location: comment.location,
      code,
      reason: comment.reason!,
      target: comment.target,
      step: stepAt(analysis, comment.location.file, comment.target),
      suppressed: matched,
    });
  }
  return { diagnostics: [...diagnostics.filter((d) => !suppressed.has(d)), ...problems], suppressions };
}

/** What is wrong with the comment itself; null when it may suppress. */
function commentProblem(comment: SuppressionComment): string | null {
  if (comment.code === null) return `a ledgerflow-ignore comment names the code it suppresses and why: write ${HOW}.`;
  if (!Object.hasOwn(DIAGNOSTIC_CODES, comment.code)) {
    const suppressible = (Object.keys(SUPPRESSIBLE) as DiagnosticCode[]).filter((c) => SUPPRESSIBLE[c] === null);
    return `ledgerflow-ignore names ${comment.code}, which is no ledgerflow diagnostic code; the codes that may be suppressed are ${suppressible.join(', ')}.`;
  }
  const why = SUPPRESSIBLE[comment.code as DiagnosticCode];
  if (why !== null) return `${comment.code} cannot be suppressed: ${why}.`;
  if (comment.reason === null) {
    return `ledgerflow-ignore ${comment.code} has no reason: say after a colon why the diagnostic does not apply (${HOW}); REVIEW.md lists it for the reviewer.`;
  }
  return null;
}

function error(location: SourceLocation, message: string): Diagnostic {
  return { code: SUPPRESSION_CODE, severity: 'error', ...location, message };
}

/**
 * The step whose declaration holds `line` of `file`: the last step or compensation declared at or
 * before it in the last workflow declared at or before it; the workflow alone when the line comes
 * before its first step; null when no workflow of the file comes before it (a helper).
 */
function stepAt(analysis: AnalysisResult, file: string, line: number): string | null {
  const at: SourceLocation = { file, line, col: Number.MAX_SAFE_INTEGER };
  const before = (location: SourceLocation): boolean => location.file === file && compareLocations(location, at) <= 0;
  const workflow = analysis.workflows
    .filter((w) => before(w.location))
    .sort((a, b) => compareLocations(a.location, b.location))
    .at(-1);
  if (workflow === undefined) return null;
  const step = stepsAndCompensations(workflow)
    .filter((s) => before(s.location))
    .sort((a, b) => compareLocations(a.location, b.location))
    .at(-1);
  const name = `workflow "${workflow.name}" v${workflow.version}`;
  if (step === undefined) return name;
  return 'compensates' in step
    ? `${name}, compensation "${step.name}" (of step "${step.compensates}")`
    : `${name}, step "${step.name}"`;
}
