import path from 'node:path';
import { analyzeWorkflows } from '../analysis/analyze-workflows.js';
import { discoverHandlerModulesSync } from '../discovery/discover-handler-modules.js';
import { discoverScheduleModulesSync } from '../discovery/discover-schedule-modules.js';
import { DEFAULT_INCLUDE, DEFAULT_OUT_DIR, discoverWorkflowFilesSync } from '../discovery/discover-workflow-files.js';
import type { Diagnostic } from '../model/diagnostic.js';
import { normalizeOutDir, readCommittedManifest } from '../run-codegen.js';
import { validateWorkflows } from '../validation/validate-workflows.js';

export interface ProjectCheckOptions {
  /** Absolute directory codegen runs in: globs, `outDir` and reported paths are relative to it. */
  readonly root: string;
  /** Globs of workflow files, as `codegen --include`. Default: `**\/*.workflow.ts`. */
  readonly include?: readonly string[];
  /** As `codegen --out`. Default: `generated`. */
  readonly outDir?: string;
}

/** The modules codegen reads, found without parsing anything (cheap): an editor asks this first. */
export interface ProjectModules {
  readonly root: string;
  readonly outDir: string;
  readonly workflowFiles: readonly string[];
  readonly handlerModules: readonly string[];
  readonly scheduleModules: readonly string[];
  /** All of the above, relative to the root, forward slashes. */
  readonly checked: ReadonlySet<string>;
}

/**
 * Discovery as `runCodegen` does it, synchronously (a language-service call cannot wait).
 * Throws CodegenOptionsError when `outDir` is not inside the root.
 */
export function discoverProjectModules(options: ProjectCheckOptions): ProjectModules {
  const root = path.resolve(options.root);
  const outDir = normalizeOutDir(root, options.outDir ?? DEFAULT_OUT_DIR);
  const workflowFiles = discoverWorkflowFilesSync({ root, include: options.include ?? DEFAULT_INCLUDE, outDir });
  const handlerModules = discoverHandlerModulesSync({ root, outDir });
  const scheduleModules = discoverScheduleModulesSync({ root, outDir, workflowFiles });
  return {
    root,
    outDir,
    workflowFiles,
    handlerModules,
    scheduleModules,
    checked: new Set([...workflowFiles, ...handlerModules, ...scheduleModules]),
  };
}

/**
 * The diagnostics `ledgerflow codegen` reports for these modules (same analysis, same rules, same
 * committed manifest; no `--retire`), sorted. Emission is `runCodegen`'s business, not the editor's.
 *
 * @example
 * const modules = discoverProjectModules({ root: '/repo' });
 * checkProjectModules(modules).filter((d) => d.file === 'src/refund.workflow.ts');
 */
export function checkProjectModules(
  modules: ProjectModules,
  /** A file's text before the disk is read (the editor's unsaved buffers); undefined for a file it does not hold. */
  readText?: (absoluteFile: string) => string | undefined,
): Diagnostic[] {
  const analysis = analyzeWorkflows(modules.root, modules.workflowFiles, {
    outDir: modules.outDir,
    handlerModules: modules.handlerModules,
    scheduleModules: modules.scheduleModules,
    ...(readText === undefined ? {} : { readText }),
  });
  return validateWorkflows({ analysis, committedManifest: readCommittedManifest(modules.root, modules.outDir) });
}
