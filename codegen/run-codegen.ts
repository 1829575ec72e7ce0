import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { analyzeWorkflows } from './analysis/analyze-workflows.js';
import { discoverHandlerModules } from './discovery/discover-handler-modules.js';
import { DEFAULT_INCLUDE, DEFAULT_OUT_DIR, discoverWorkflowFiles, toPosix } from './discovery/discover-workflow-files.js';
import { emitGenerated } from './emit/emit-generated.js';
import { MIGRATIONS_DIR, type GeneratedFile } from './emit/generated-file.js';
import { hasErrors, type Diagnostic } from './model/diagnostic.js';
import { MANIFEST_FILE_NAME, parseManifest, type CommittedManifest } from './model/manifest.js';
import type { AnalysisResult } from './model/workflow-model.js';
import { validateWorkflows } from './validation/validate-workflows.js';

export interface CodegenOptions {
  /** Directory to search and to resolve `outDir` against. Default: the current directory. */
  readonly root?: string;
  /** Globs of workflow files, relative to the root. Default: `**\/*.workflow.ts`. */
  readonly include?: readonly string[];
  /** Output directory relative to the root. Default: `generated`. */
  readonly outDir?: string;
}

/** The options of `runCodegen` that it checks, named as `CodegenOptions` spells them. */
export type CheckedCodegenOption = 'root' | 'outDir';

/**
 * `runCodegen` cannot use the options it was given. The message names options as the API
 * spells them (`root`, `outDir`); a front end with other names for them (the CLI's `--root`,
 * `--out`) words the same problem with `describeOptionsError`. A RangeError, as before it had
 * its own type.
 */
export class CodegenOptionsError extends RangeError {
  override readonly name = 'CodegenOptionsError';
  /** The option that is wrong. */
  readonly option: CheckedCodegenOption;
  /** The root directory, resolved to an absolute path. */
  readonly root: string;
  /** The value given for `option` (for `root`, resolved to an absolute path). */
  readonly value: string;

  constructor(option: CheckedCodegenOption, root: string, value: string) {
    super(describeOptionsProblem(option, root, value, { root: 'root', outDir: 'outDir' }));
    this.option = option;
    this.root = root;
    this.value = value;
  }
}

/** The error's message with each option called by `names` (e.g. the CLI's flags). */
export function describeOptionsError(error: CodegenOptionsError, names: Readonly<Record<CheckedCodegenOption, string>>): string {
  return describeOptionsProblem(error.option, error.root, error.value, names);
}

function describeOptionsProblem(
  option: CheckedCodegenOption,
  root: string,
  value: string,
  names: Readonly<Record<CheckedCodegenOption, string>>,
): string {
  switch (option) {
    case 'root':
      return `${names.root} must be an existing directory; "${value}" is not one.`;
    case 'outDir':
      return `${names.outDir} must be a directory inside ${names.root} (${root}); got "${value}".`;
  }
}

export interface CodegenRun {
  readonly root: string;
  /** The globs that found the workflow files. */
  readonly include: readonly string[];
  /** Output directory relative to the root, forward slashes. */
  readonly outDir: string;
  readonly analysis: AnalysisResult;
  /** Every diagnostic, sorted. */
  readonly diagnostics: readonly Diagnostic[];
  /** What codegen would write; null when there are errors (nothing is generated from an invalid model). */
  readonly generated: readonly GeneratedFile[] | null;
}

/**
 * The composition root: discovery → analysis → validation → emission, all in memory. Writing
 * (`writeGenerated`) and comparing (`compareGenerated`) are separate, so `--check` and the
 * tests run exactly what `codegen` runs.
 *
 * @example
 * const run = await runCodegen({ root: '/repo' });
 * if (run.generated !== null) writeGenerated(run.root, run.outDir, run.generated);
 *
 * @throws CodegenOptionsError when `root` is not a directory or `outDir` is not inside it.
 */
export async function runCodegen(options: CodegenOptions = {}): Promise<CodegenRun> {
  const root = path.resolve(options.root ?? process.cwd());
  if (!existsSync(root) || !statSync(root).isDirectory()) {
    throw new CodegenOptionsError('root', root, root);
  }
  const outDir = normalizeOutDir(root, options.outDir ?? DEFAULT_OUT_DIR);
  const include = options.include ?? DEFAULT_INCLUDE;
  const files = await discoverWorkflowFiles({ root, include, outDir });
  const analysis = analyzeWorkflows(root, files, { outDir, handlerModules: await discoverHandlerModules({ root, outDir }) });
  const diagnostics = validateWorkflows({ analysis, committedManifest: readCommittedManifest(root, outDir) });
  const generated = hasErrors(diagnostics)
    ? null
    : emitGenerated({ workflows: analysis.workflows, outDir, existingMigrations: readExistingMigrations(root, outDir) });
  return { root, include, outDir, analysis, diagnostics, generated };
}

/**
 * The output directory relative to the root; it must lie inside it (generated imports are
 * relative). Throws CodegenOptionsError otherwise.
 */
export function normalizeOutDir(root: string, outDir: string): string {
  const relative = toPosix(path.relative(root, path.resolve(root, outDir)));
  if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) {
    throw new CodegenOptionsError('outDir', root, outDir);
  }
  return relative;
}

function readCommittedManifest(root: string, outDir: string): CommittedManifest {
  const relative = `${outDir}/${MANIFEST_FILE_NAME}`;
  const absolute = path.join(root, relative);
  if (!existsSync(absolute)) return { status: 'absent' };
  return parseManifest(relative, readFileSync(absolute, 'utf8'));
}

function readExistingMigrations(root: string, outDir: string): string[] {
  const directory = path.join(root, outDir, MIGRATIONS_DIR);
  return existsSync(directory) ? readdirSync(directory).filter((name) => name.endsWith('.sql')).sort() : [];
}
