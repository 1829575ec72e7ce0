import { shapeHash } from '../../../dsl/workflow-shape.js';
import type { Diagnostic } from '../../model/diagnostic.js';
import type { ManifestStep } from '../../model/manifest.js';
import type { StepModel } from '../../model/workflow-model.js';
import type { Rule } from '../rule.js';

/**
 * LF007: a workflow version that the committed manifest already knows must keep its steps.
 * Runs are pinned to a version; changing its steps under them would resume a run at a step
 * that means something else.
 */
export const unbumpedVersion: Rule = ({ analysis, committedManifest }) => {
  if (committedManifest.status === 'absent') return [];
  if (committedManifest.status === 'invalid') {
    return [
      {
        code: 'LF007',
        severity: 'error',
        file: committedManifest.file,
        line: 1,
        col: 1,
        message: `cannot read the committed manifest: ${committedManifest.error}; restore it from version control (it is how codegen detects changed workflow versions).`,
      },
    ];
  }
  const diagnostics: Diagnostic[] = [];
  const entries = committedManifest.manifest.workflows;
  for (const workflow of analysis.workflows) {
    const committed = entries.find((e) => e.name === workflow.name && e.version === workflow.version);
    if (committed === undefined || committed.definitionHash === shapeHash(workflow)) continue;
    const highest = Math.max(
      workflow.version,
      ...entries.filter((e) => e.name === workflow.name).map((e) => e.version),
      ...analysis.workflows.filter((w) => w.name === workflow.name).map((w) => w.version),
    );
    diagnostics.push({
      code: 'LF007',
      severity: 'error',
      ...workflow.versionLocation,
      message:
        `workflow "${workflow.name}" v${workflow.version} changed since it was generated (${describeChanges(committed.steps, workflow.steps)}); ` +
        `runs already started on v${workflow.version} are pinned to its steps — set version: ${highest + 1} ` +
        `(keep v${workflow.version} declared while its runs drain), or revert the change.`,
    });
  }
  return diagnostics;
};

function describeChanges(before: readonly ManifestStep[], after: readonly StepModel[]): string {
  const changes: string[] = [];
  for (const old of before) {
    const now = after.find((s) => s.name === old.name);
    if (now === undefined) {
      changes.push(`removed step "${old.name}"`);
      continue;
    }
    if (now.kind !== old.kind) changes.push(`step "${old.name}" ${old.kind} → ${now.kind}`);
    if (now.idempotentByKey !== old.idempotentByKey) {
      changes.push(`step "${old.name}" idempotentByKey ${old.idempotentByKey} → ${now.idempotentByKey}`);
    }
  }
  for (const now of after) {
    if (!before.some((s) => s.name === now.name)) changes.push(`added ${now.kind} step "${now.name}"`);
  }
  const order = (steps: readonly { name: string }[]): string => steps.map((s) => s.name).join(',');
  const common = new Set(after.map((s) => s.name));
  const oldOrder = order(before.filter((s) => common.has(s.name)));
  const newOrder = order(after.filter((s) => before.some((o) => o.name === s.name)));
  if (oldOrder !== newOrder) changes.push(`steps reordered (${before.map((s) => s.name).join(' → ')} is now ${after.map((s) => s.name).join(' → ')})`);
  return changes.length > 0 ? changes.join('; ') : 'its definition hash differs';
}
