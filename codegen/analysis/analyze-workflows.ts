import path from 'node:path';
import { DEFAULT_OUT_DIR } from '../discovery/discover-workflow-files.js';
import { compareLocations } from '../model/source-location.js';
import type { AnalysisResult, MalformedDeclaration, WorkflowModel } from '../model/workflow-model.js';
import { AnalysisProgram } from './analysis-program.js';
import { analyzeHandlers } from './handlers/analyze-handlers.js';
import { PurityAnalyzer } from './purity-analyzer.js';
import { analyzeWorkflowFile } from './workflow-declarations.js';

/** What else the analysis stage looks at besides the workflow files. */
export interface AnalyzeOptions {
  /**
   * Modules that may bind handlers through generated contracts (relative to the root; see
   * discoverHandlerModules). Given, the handlers they bind are analysed too (`handlers`).
   */
  readonly handlerModules?: readonly string[];
  /** The output directory relative to the root, where the contracts the handler modules import live. Default: `generated`. */
  readonly outDir?: string;
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
  const program = new AnalysisProgram(root, [...absolute, ...(handlerModules ?? [])]);
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
  workflows.sort((a, b) => compareLocations(a.location, b.location));
  malformed.sort((a, b) => compareLocations(a.location, b.location));
  const handlers =
    handlerModules === undefined
      ? undefined
      : analyzeHandlers(program, handlerModules, path.resolve(root, options.outDir ?? DEFAULT_OUT_DIR), workflows);
  return {
    files: files.map((f) => program.relativePath(path.resolve(root, f))).sort(),
    workflows,
    malformed,
    ...(handlers === undefined ? {} : { handlers }),
  };
}
