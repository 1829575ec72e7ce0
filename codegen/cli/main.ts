import { compareGenerated, type FileDifference } from '../output/compare-generated.js';
import { writeGenerated } from '../output/write-generated.js';
import { describeDifference, formatGithub, formatJson, formatText } from '../report/format-diagnostics.js';
import { hasErrors, type Diagnostic } from '../model/diagnostic.js';
import type { SourceCache } from '../analysis/analysis-program.js';
import { CodegenOptionsError, describeOptionsError, runCodegen, type CodegenRun } from '../run-codegen.js';
import { OPTION_FLAGS, parseArgs, USAGE, CodegenUsageError, type CliOptions } from './parse-args.js';
import { watchCodegen } from './watch-codegen.js';
import { processIo, type CliIo } from '../../runtime/cli/cli-io.js';

/**
 * `ledgerflow codegen [options]` (argv without the word `codegen`). Returns the exit code: 0 ok,
 * 1 errors (or warnings with --strict) or out-of-date output with --check, 2 bad command line.
 * With --watch, runs again on every change until SIGINT/SIGTERM, then returns 0.
 *
 * @example
 * process.exitCode = await main(['--check', '--format', 'github']);
 */
export async function main(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  let options: CliOptions;
  try {
    options = parseArgs(argv);
  } catch (error) {
    if (!(error instanceof CodegenUsageError)) throw error;
    io.err(`ledgerflow codegen: ${error.message}\nRun \`ledgerflow codegen --help\` for the options.\n`);
    return 2;
  }
  if (options.help) {
    io.out(USAGE);
    return 0;
  }
  if (options.watch) return watchCodegen(options, (cache) => codegenOnce(options, io, cache));
  return codegenOnce(options, io);
}

/**
 * One codegen run as the command line reports it: diagnostics and summary on stdout, notes on
 * stderr. Returns the exit code (2 for options runCodegen refuses).
 */
async function codegenOnce(options: CliOptions, io: CliIo, cache?: SourceCache): Promise<number> {
  const started = performance.now();
  let run: CodegenRun;
  try {
    run = await runCodegen({
      ...(options.root === undefined ? {} : { root: options.root }),
      ...(options.include === undefined ? {} : { include: options.include }),
      ...(options.out === undefined ? {} : { outDir: options.out }),
      ...(options.retire.length === 0 ? {} : { retire: options.retire }),
      ...(options.release.length === 0 ? {} : { release: options.release }),
      ...(cache === undefined ? {} : { cache }),
    });
  } catch (error) {
    if (error instanceof CodegenOptionsError) {
      io.err(`ledgerflow codegen: ${describeOptionsError(error, OPTION_FLAGS)}\n`);
      return 2;
    }
    throw error;
  }
  if (run.analysis.files.length === 0) {
    io.err(`ledgerflow codegen: note: no file under ${run.root} matches ${run.include.join(', ')}.\n`);
  }
  for (const note of run.notes) io.err(`ledgerflow codegen: note: ${note}\n`);
  const failed = hasErrors(run.diagnostics) || (options.strict && run.diagnostics.length > 0);

  let differences: FileDifference[] | null = null;
  let summary: string;
  if (run.generated === null) {
    summary = options.check ? 'check failed: fix the errors above.' : 'nothing written: fix the errors above.';
  } else if (options.check) {
    differences = compareGenerated(run.root, run.outDir, run.generated);
    summary =
      differences.length === 0
        ? `${run.outDir}/ is up to date.`
        : `${run.outDir}/ is out of date; run \`npx ledgerflow codegen\` and commit the result.`;
  } else {
    const result = writeGenerated(run.root, run.outDir, run.generated);
    summary = `wrote ${result.written.length} file(s)${result.removed.length > 0 ? `, removed ${result.removed.length}` : ''} in ${run.outDir}/.`;
  }
  const elapsed = Math.round(performance.now() - started);
  const counts = `${run.analysis.workflows.length} workflow version(s) in ${run.analysis.files.length} file(s)`;
  const tallied = `${tally(run.diagnostics)}${run.suppressions.length === 0 ? '' : `, ${run.suppressions.length} suppressed (listed in REVIEW.md)`}`;

  switch (options.format) {
    case 'json':
      io.out(formatJson(run.diagnostics, differences, run.suppressions));
      break;
    case 'github':
      io.out(formatGithub(run.diagnostics, differences ?? []));
      io.out(`ledgerflow codegen: ${counts}, ${tallied}; ${summary}\n`);
      break;
    case 'text':
      io.out(formatText(run.diagnostics));
      for (const difference of differences ?? []) {
        io.out(`${difference.file} - ${difference.status}: ${describeDifference(difference)}\n`);
      }
      io.out(`ledgerflow codegen: ${counts}, ${tallied} (${elapsed} ms); ${summary}\n`);
      break;
  }
  return failed || (differences !== null && differences.length > 0) ? 1 : 0;
}

function tally(diagnostics: readonly Diagnostic[]): string {
  const errors = diagnostics.filter((d) => d.severity === 'error').length;
  const warnings = diagnostics.length - errors;
  return `${errors} error(s), ${warnings} warning(s)`;
}
