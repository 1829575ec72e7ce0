import path from 'node:path';
import type { Diagnostic } from '../../model/diagnostic.js';
import type { Rule } from '../rule.js';

/**
 * LF009: every workflow version in the committed manifest stays declared until it is retired.
 * Runs already started on a version need its declaration (and its contract, which codegen
 * would otherwise delete) until they finish; dropping it in the same change that bumps the
 * version strands them. `ledgerflow codegen --retire name@version` takes a version out of the
 * manifest (run-codegen.ts); a version whose declaration is malformed (LF008) is not reported.
 */
export const undeclaredVersion: Rule = ({ analysis, committedManifest }) => {
  if (committedManifest.status !== 'present') return [];
  const diagnostics: Diagnostic[] = [];
  committedManifest.manifest.workflows.forEach((entry, index) => {
    const { name, version } = entry;
    if (analysis.workflows.some((w) => w.name === name && w.version === version)) return;
    const unreadable = analysis.malformed.some(
      (m) =>
        m.workflow === undefined ||
        (m.workflow.name === name && (m.workflow.version === null || m.workflow.version === version)),
    );
    if (unreadable) return;
    const keepIn = path.posix.join(path.posix.dirname(entry.source ?? ''), `${name}.v${version}.workflow.ts`);
    diagnostics.push({
      code: 'LF009',
      severity: 'error',
      file: committedManifest.file,
      line: committedManifest.entryLines[index] ?? 1,
      col: 1,
      message:
        `workflow "${name}" v${version} is pinned in the manifest but no longer declared; keep it declared (e.g. move it to ${keepIn}) ` +
        `while runs of it may be unfinished — \`ledgerflow versions\` lists them — or retire it with \`ledgerflow codegen --retire ${name}@${version}\`.`,
    });
  });
  return diagnostics;
};
