/**
 * `npm run check:deps`: no import cycle in dsl/, codegen/ and runtime/, and no import a rule of
 * scripts/dependency-rules.ts forbids. Prints one line per problem and exits 1 if there is any
 * (DESIGN.md, "Module layering").
 */
import { fileURLToPath } from 'node:url';
import { checkDependencies, formatDiagnostic } from './dependency-check.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const { files, edges, diagnostics } = checkDependencies(root);
for (const diagnostic of diagnostics) process.stdout.write(`${formatDiagnostic(diagnostic)}\n`);
if (diagnostics.length > 0) {
  process.stderr.write(`check:deps: ${diagnostics.length} problem(s) in the imports of dsl/, codegen/ and runtime/.\n`);
  process.exitCode = 1;
} else {
  process.stdout.write(`check:deps: ${files.length} files, ${edges.length} imports: no cycle, no forbidden import.\n`);
}
