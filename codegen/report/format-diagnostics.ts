import type { Diagnostic } from '../model/diagnostic.js';
import type { Suppression } from '../model/suppression.js';
import type { FileDifference } from '../output/compare-generated.js';

export const OUTPUT_FORMATS = ['text', 'github', 'json'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** `path:line:col - error LF001: message`, one per line. */
export function formatText(diagnostics: readonly Diagnostic[]): string {
  return diagnostics.map((d) => `${d.file}:${d.line}:${d.col} - ${d.severity} ${d.code}: ${d.message}\n`).join('');
}

/** GitHub Actions workflow commands: annotations on the pull request's diff. */
export function formatGithub(diagnostics: readonly Diagnostic[], differences: readonly FileDifference[] = []): string {
  const lines = diagnostics.map(
    (d) => `::${d.severity} file=${property(d.file)},line=${d.line},col=${d.col}::${data(`${d.code}: ${d.message}`)}\n`,
  );
  for (const difference of differences) {
    lines.push(`::error file=${property(difference.file)}::${data(describeDifference(difference))}\n`);
  }
  return lines.join('');
}

/**
 * One JSON document of a fixed shape: every diagnostic, their counts, `outOfDate` — for
 * --check, the files that differ; `null` when nothing was compared (no --check, or errors, from
 * which nothing is generated), so that a script can tell "not compared" from "up to date" (`[]`)
 * — and `suppressions`: every `// ledgerflow-ignore` comment in effect (where it is, the code,
 * the reason, the line and step it applies to, and the diagnostics it took out of the report).
 */
export function formatJson(
  diagnostics: readonly Diagnostic[],
  differences: readonly FileDifference[] | null,
  suppressions: readonly Suppression[] = [],
): string {
  const document = {
    diagnostics,
    errors: diagnostics.filter((d) => d.severity === 'error').length,
    warnings: diagnostics.filter((d) => d.severity === 'warning').length,
    outOfDate: differences,
    suppressions: suppressions.map(({ location, code, reason, target, step, suppressed }) => ({
      ...location,
      code,
      reason,
      target,
      step,
      suppressed,
    })),
  };
  return `${JSON.stringify(document, null, 2)}\n`;
}

export function describeDifference(difference: FileDifference): string {
  switch (difference.status) {
    case 'stale':
      return 'generated file is out of date; run `npx ledgerflow codegen` and commit the result';
    case 'missing':
      return 'generated file is missing; run `npx ledgerflow codegen` and commit the result';
    case 'extra':
      return 'generated file belongs to no workflow any more; run `npx ledgerflow codegen` to remove it';
  }
}

function data(text: string): string {
  return text.replaceAll('%', '%25').replaceAll('\r', '%0D').replaceAll('\n', '%0A');
}

function property(text: string): string {
  return data(text).replaceAll(':', '%3A').replaceAll(',', '%2C');
}
