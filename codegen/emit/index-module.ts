import type { WorkflowModel } from '../model/workflow-model.js';
import { EVENTS_FILE, INDEX_FILE, tsHeader } from './generated-file.js';
import { compareWorkflows, contractFileName, importSpecifier } from './naming.js';

/**
 * `index.ts`: re-exports every contract (and the typed event senders, when there are any) and
 * lists every workflow version, sorted by name and version, for clients and workers.
 *
 * @param outDir the output directory relative to the root (for import paths).
 * @param withEvents whether `contracts/events.ts` is generated too.
 */
export function emitIndexModule(workflows: readonly WorkflowModel[], outDir: string, withEvents = false): string {
  const sorted = [...workflows].sort(compareWorkflows);
  const indexPath = `${outDir}/${INDEX_FILE}`;
  const imports = sorted.map((w) => `import { ${w.exportName} } from '${importSpecifier(indexPath, w.file)}';`);
  const reexports = [...sorted.map(contractFileName), ...(withEvents ? [EVENTS_FILE] : [])].map(
    (file) => `export * from './${file.replace(/\.ts$/, '.js')}';`,
  );
  const list = sorted.length === 0 ? '[]' : `[\n${sorted.map((w) => `  ${w.exportName},`).join('\n')}\n]`;
  return [
    tsHeader('Registry of every workflow version codegen found. Regenerate with `npx ledgerflow codegen`.'),
    ...imports,
    ...(imports.length > 0 ? [''] : []),
    ...reexports,
    ...(reexports.length > 0 ? [''] : []),
    '/** Every workflow version, sorted by name and version: give these to a client or worker. */',
    `export const workflows = ${list} as const;`,
    '',
  ].join('\n');
}
