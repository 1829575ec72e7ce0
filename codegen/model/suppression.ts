import type { Diagnostic, DiagnosticCode } from './diagnostic.js';
import type { SourceLocation } from './source-location.js';

/**
 * A `// ledgerflow-ignore LF005: reason` comment as analysis read it, before anything is checked:
 * `code` is the text written (null when none), `reason` the text after the colon (null when
 * there is no colon or nothing after it). `target` is the line it applies to: the next line that
 * is not itself a ledgerflow-ignore comment, so several can stack above one line.
 */
export interface SuppressionComment {
  /** Where the comment starts. */
  readonly location: SourceLocation;
  readonly code: string | null;
  readonly reason: string | null;
  readonly target: number;
}

/**
 * A suppression in effect: the diagnostics of `code` on line `target` of `location.file` that it
 * took out of the report, and its reason. Listed in REVIEW.md and in `--format json`, so that an
 * escape hatch is never silent.
 */
export interface Suppression {
  readonly location: SourceLocation;
  readonly code: DiagnosticCode;
  readonly reason: string;
  readonly target: number;
  /** `workflow "orders" v1, step "charge"`; null when the line is in no workflow declaration (a helper). */
  readonly step: string | null;
  /** What would have been reported without it. */
  readonly suppressed: readonly Diagnostic[];
}
