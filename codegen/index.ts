export {
  runCodegen,
  CodegenOptionsError,
  describeOptionsError,
  type CheckedCodegenOption,
  type CodegenOptions,
  type CodegenRun,
} from './run-codegen.js';
export { main } from './cli/main.js';
export { SourceCache } from './analysis/analysis-program.js';
export { analyzeWorkflows } from './analysis/analyze-workflows.js';
export {
  validateWorkflows,
  validateWorkflowsWithSuppressions,
  type ValidationResult,
} from './validation/validate-workflows.js';
export type { Suppression } from './model/suppression.js';
export { emitGenerated, type EmitInput } from './emit/emit-generated.js';
export { compareGenerated, type FileDifference } from './output/compare-generated.js';
export { writeGenerated, type WriteResult } from './output/write-generated.js';
export { formatGithub, formatJson, formatText, type OutputFormat } from './report/format-diagnostics.js';
export { DIAGNOSTIC_CODES, type Diagnostic, type DiagnosticCode, type Severity } from './model/diagnostic.js';
export type { SourceLocation } from './model/source-location.js';
export type {
  AnalysisResult,
  EventReference,
  FanOutModel,
  FunctionModel,
  KeyFinding,
  KeyModel,
  QueueReference,
  QueueUseModel,
  StepFunctionModel,
  StepModel,
  StepRead,
  WaitModel,
  WorkflowModel,
  WorkflowReference,
} from './model/workflow-model.js';
export type { ManifestFile, ManifestStep, ManifestWorkflow } from './model/manifest.js';
export { workflowVersionSql, workflowVersionMigrationSuffix } from './emit/workflow-version-sql.js';
