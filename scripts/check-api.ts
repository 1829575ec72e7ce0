/**
 * `npm run check:api`: each entry point of package.json's `exports` exports what its committed
 * report under api/ lists (scripts/api-report.ts). Prints one diagnostic with a diff per
 * difference and exits 1 if there is any; `npm run check:api -- --update` rewrites the reports.
 */
import { fileURLToPath } from 'node:url';
import { checkApiReports, formatApiDiagnostic } from './api-report.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const unknown = args.filter((arg) => arg !== '--update');
if (unknown.length > 0) {
  process.stderr.write(`check:api: unknown argument ${unknown.join(' ')}; the only option is --update.\n`);
  process.exitCode = 2;
} else {
  const update = args.includes('--update');
  const { entryPoints, diagnostics, updated } = checkApiReports(root, { update });
  for (const diagnostic of diagnostics) process.stdout.write(`${formatApiDiagnostic(diagnostic)}\n`);
  for (const file of updated) process.stdout.write(`check:api: updated ${file}\n`);
  if (diagnostics.length > 0) {
    process.stderr.write(
      `check:api: ${diagnostics.length} problem(s) in the API reports of ${entryPoints.length} entry points.\n`,
    );
    process.exitCode = 1;
  } else {
    process.stdout.write(
      `check:api: ${entryPoints.length} entry points, ${update ? `${updated.length} report(s) rewritten` : 'each as its report in api/ lists'}.\n`,
    );
  }
}
