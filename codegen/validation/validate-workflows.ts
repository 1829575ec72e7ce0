import { compareDiagnostics, type Diagnostic, type DiagnosticCode } from '../model/diagnostic.js';
import type { Suppression } from '../model/suppression.js';
import { applySuppressions, type SUPPRESSION_CODE } from './apply-suppressions.js';
import type { Rule, ValidationInput } from './rule.js';
import { compensationKey } from './rules/compensation-key.js';
import { conditionalStepRead } from './rules/conditional-step-read.js';
import { constantKey } from './rules/constant-key.js';
import { duplicateNames } from './rules/duplicate-names.js';
import { forEachKeyIgnoresItem } from './rules/for-each-key-ignores-item.js';
import { malformedDeclaration } from './rules/malformed-declaration.js';
import { missingCompensation } from './rules/missing-compensation.js';
import { missingKey } from './rules/missing-key.js';
import { mutableKeyRead } from './rules/mutable-key-read.js';
import { nondeterministicKey } from './rules/nondeterministic-key.js';
import { objectInKey } from './rules/object-in-key.js';
import { performIgnoresKey } from './rules/perform-ignores-key.js';
import { stepEffect } from './rules/step-effect.js';
import { stepOrder } from './rules/step-order.js';
import { unbumpedVersion } from './rules/unbumped-version.js';
import { undeclaredVersion } from './rules/undeclared-version.js';
import { writeOutsideTx } from './rules/write-outside-tx.js';

/** One rule per code (but the suppression comments' own): adding a code without its rule does not compile. */
const RULES: Record<Exclude<DiagnosticCode, typeof SUPPRESSION_CODE>, Rule> = {
  LF001: missingKey,
  LF002: nondeterministicKey,
  LF003: stepOrder,
  LF004: mutableKeyRead,
  LF005: constantKey,
  LF006: duplicateNames,
  LF007: unbumpedVersion,
  LF008: malformedDeclaration,
  LF009: undeclaredVersion,
  LF010: writeOutsideTx,
  LF011: stepEffect,
  LF012: performIgnoresKey,
  LF013: forEachKeyIgnoresItem,
  LF014: compensationKey,
  LF015: missingCompensation,
  LF016: objectInKey,
  LF017: conditionalStepRead,
};

/** What validation found: the diagnostics to report and the suppression comments in effect. */
export interface ValidationResult {
  /** Sorted by file and position; without those a `// ledgerflow-ignore` comment suppressed. */
  readonly diagnostics: Diagnostic[];
  /** Sorted by location, each with what it suppressed. */
  readonly suppressions: Suppression[];
}

/**
 * The validation stage: runs every rule over the model, then takes out what the
 * `// ledgerflow-ignore` comments suppress (applySuppressions). Never throws for a problem in
 * the user's code.
 */
export function validateWorkflowsWithSuppressions(input: ValidationInput): ValidationResult {
  const collected = Object.values(RULES).flatMap((rule) => rule(input));
  const { diagnostics, suppressions } = applySuppressions(collected, input.analysis);
  return { diagnostics: diagnostics.sort(compareDiagnostics), suppressions };
}

/** The diagnostics of validateWorkflowsWithSuppressions alone, sorted by file and position. */
export function validateWorkflows(input: ValidationInput): Diagnostic[] {
  return validateWorkflowsWithSuppressions(input).diagnostics;
}
