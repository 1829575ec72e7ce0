import path from 'node:path';
import { compareLocations } from '../model/source-location.js';
import type { AnalysisResult, MalformedDeclaration, WorkflowModel } from '../model/workflow-model.js';
import { AnalysisProgram } from './analysis-program.js';
import { PurityAnalyzer } from './purity-analyzer.js';
import { analyzeWorkflowFile } from './workflow-declarations.js';

/**
 * The analysis stage: parses the discovered files and reads every workflow declaration into
 * plain data. Nothing after this stage touches the compiler.
 *
 * @example
 * const analysis = analyzeWorkflows('/repo', ['examples/refund/refund.workflow.ts']);
 * analysis.workflows[0]?.steps.map((s) => s.name); // ['load', 'refund']
 */
export function analyzeWorkflows(root: string, files: readonly string[]): AnalysisResult {
  const absolute = files.map((file) => path.resolve(root, file));
  const program = new AnalysisProgram(root, absolute);
  const analyzer = new PurityAnalyzer(program);
  const workflows: WorkflowModel[] = [];
  const malformed: MalformedDeclaration[] = [];
  for (const file of absolute) {
    const sourceFile = program.sourceFile(file);
    if (sourceFile === undefined) continue;
    const result = analyzeWorkflowFile(program, analyzer, sourceFile);
    workflows.push(...result.workflows);
    malformed.push(...result.malformed);
  }
  workflows.sort((a, b) => compareLocations(a.location, b.location));
  malformed.sort((a, b) => compareLocations(a.location, b.location));
  return { files: files.map((f) => program.relativePath(path.resolve(root, f))).sort(), workflows, malformed };
}
