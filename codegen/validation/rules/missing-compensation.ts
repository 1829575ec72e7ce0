import type { Diagnostic } from '../../model/diagnostic.js';
import type { Rule } from '../rule.js';

/**
 * LF015 (warning): in a workflow that declares at least one compensation, a `transactional` or
 * `external` step declares none. When the run fails for good or is cancelled with `compensate`,
 * the effects that have compensations are undone and this one stays — usually an oversight; an
 * effect that is right to keep (a receipt, an audit row) can say so by leaving the warning. The
 * workflow's last step is exempt: recording its effect completes the run, so nothing after it can
 * fail and its compensation could never run.
 */
export const missingCompensation: Rule = ({ analysis }) => {
  const diagnostics: Diagnostic[] = [];
  for (const workflow of analysis.workflows) {
    const compensated = workflow.steps.filter((s) => s.compensation !== undefined);
    if (compensated.length === 0) continue;
    for (const step of workflow.steps.slice(0, -1)) {
      if ((step.kind !== 'transactional' && step.kind !== 'external') || step.compensation !== undefined) continue;
      diagnostics.push({
        code: 'LF015',
        severity: 'warning',
        ...step.location,
        message:
          `${step.kind} step "${step.name}" declares no compensate, but workflow "${workflow.name}" v${workflow.version} compensates ` +
          `${compensated.map((s) => `"${s.name}"`).join(', ')}: when a run fails for good or is cancelled with compensate, those are undone and ` +
          `the effect of "${step.name}" stays — add compensate: { name, key, output } if it should be undone too.`,
      });
    }
  }
  return diagnostics;
};
