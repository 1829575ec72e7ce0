import path from 'node:path';
import { DEFAULT_OUT_DIR } from '../discovery/discover-workflow-files.js';
import { compareLocations } from '../model/source-location.js';
import type { AnalysisResult, MalformedDeclaration, ScheduleModel, WorkflowModel } from '../model/workflow-model.js';
import { AnalysisProgram, type SourceCache } from './analysis-program.js';
import { analyzeHandlers } from './handlers/analyze-handlers.js';
import { PurityAnalyzer } from './purity-analyzer.js';
import { analyzeScheduleFile } from './schedule-declarations.js';
import { readSuppressionComments } from './suppression-comments.js';
import { analyzeWorkflowFile } from './workflow-declarations.js';

/** What else the analysis stage looks at besides the workflow files. */
export interface AnalyzeOptions {
  /**
   * Modules that may bind handlers through generated contracts (relative to the root; see
   * discoverHandlerModules). Given, the handlers they bind are analysed too (`handlers`).
   */
  readonly handlerModules?: readonly string[];
  /**
   * Modules besides the workflow files that may declare schedules (relative to the root; see
   * discoverScheduleModules). The schedules of both are read and their `input` checked (`schedules`).
   */
  readonly scheduleModules?: readonly string[];
  /**
   * A file's text, before the disk is read (an editor's unsaved buffers: the TypeScript plugin);
   * undefined for a file it does not hold. Default: every file is read from disk.
   */
  readonly readText?: (absoluteFile: string) => string | undefined;
  /** The output directory relative to the root, where the contracts the handler modules import live. Default: `generated`. */
  readonly outDir?: string;
  /** Sources parsed by an earlier analysis, reused where unchanged (`codegen --watch`). */
  readonly cache?: SourceCache;
}

/**
 * The analysis stage: parses the discovered files and reads every workflow declaration into
 * plain data, and, given handler modules, what the handlers they bind do. Nothing after this
 * stage touches the compiler.
 *
 * @example
 * const analysis = analyzeWorkflows('/repo', ['examples/refund/refund.workflow.ts']);
 * analysis.workflows[0]?.steps.map((s) => s.name); // ['load', 'refund']
 */
export function analyzeWorkflows(root: string, files: readonly string[], options: AnalyzeOptions = {}): AnalysisResult {
  const absolute = files.map((file) => path.resolve(root, file));
  const handlerModules = options.handlerModules?.map((file) => path.resolve(root, file));
  const scheduleModules = (options.scheduleModules ?? []).map((file) => path.resolve(root, file));
  const program = new AnalysisProgram(
    root,
    [...new Set([...absolute, ...scheduleModules, ...(handlerModules ?? [])])],
    options.readText,
    options.cache,
  );
  const analyzer = new PurityAnalyzer(program);
  const workflows: WorkflowModel[] = [];
  const malformed: MalformedDeclaration[] = [];
  const workflowFiles = new Set(absolute);
  for (const file of absolute) {
    const sourceFile = program.sourceFile(file);
    if (sourceFile === undefined) continue;
    const result = analyzeWorkflowFile(program, analyzer, sourceFile, workflowFiles);
    workflows.push(...result.workflows);
    malformed.push(...result.malformed);
  }
  const schedules: ScheduleModel[] = [];
  for (const file of new Set([...absolute, ...scheduleModules])) {
    const sourceFile = program.sourceFile(file);
    if (sourceFile === undefined) continue;
    const result = analyzeScheduleFile(program, analyzer, sourceFile);
    schedules.push(...result.schedules);
    malformed.push(...result.malformed);
  }
  workflows.sort((a, b) => compareLocations(a.location, b.location));
  schedules.sort((a, b) => compareLocations(a.location, b.location));
  malformed.sort((a, b) => compareLocations(a.location, b.location));
  const handlers =
    handlerModules === undefined
      ? undefined
      : analyzeHandlers(program, handlerModules, path.resolve(root, options.outDir ?? DEFAULT_OUT_DIR), workflows);
  return {
    files: files.map((f) => program.relativePath(path.resolve(root, f))).sort(),
    workflows,
    schedules,
    malformed,
    suppressionComments: readSuppressionComments(program),
    ...(handlers === undefined ? {} : { handlers }),
  };
}
