import { ts } from 'ts-morph';
import { WORKFLOW_NAME } from '../../dsl/names.js';
import { STEP_KINDS, type StepKind } from '../../dsl/step-kind.js';
import type { PinnedPart } from '../model/pinned-parts.js';
import type { MalformedDeclaration, QueueUseModel, StepModel, WorkflowModel } from '../model/workflow-model.js';
import type { AnalysisProgram } from './analysis-program.js';
import { dslImports, isDslCall, workflowIdentity } from './dsl-declarations.js';
import { runContext } from './function-model.js';
import { pinPart, assignedValue } from './property-values.js';
import type { PurityAnalyzer } from './purity-analyzer.js';
import { readQueueUse } from './queue-uses.js';
import { schemaShape } from './schema-shapes.js';
import { readStep, type StepCall } from './step-declarations.js';
import { exportedConstName, outermostWrapper, propertyName, skipWrappers } from './syntax.js';

/** `.step, .transactional, .external, .sleep, .waitFor, .child and .forEach`, for messages. */
const STEP_METHODS = `${STEP_KINDS.slice(0, -1)
  .map((k) => `.${k}`)
  .join(', ')} and .${STEP_KINDS.at(-1)!}`;

export interface FileAnalysis {
  readonly workflows: WorkflowModel[];
  readonly malformed: MalformedDeclaration[];
}

/**
 * Finds `export const x = workflow('name', { version: N, ... }).step(...)...` declarations in one
 * file and reads them into the model. Anything codegen cannot read without running the code
 * (a computed name, a spread config, a chain split over several statements) is reported as
 * malformed rather than guessed at.
 */
export function analyzeWorkflowFile(
  program: AnalysisProgram,
  analyzer: PurityAnalyzer,
  sourceFile: ts.SourceFile,
  workflowFiles: ReadonlySet<string>,
): FileAnalysis {
  const result: FileAnalysis = { workflows: [], malformed: [] };
  const imports = dslImports(sourceFile, 'workflow');
  if (imports.functions.size === 0 && imports.namespaces.size === 0) return result;
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) && isDslCall(program, node, imports, 'workflow')) {
      const workflow = readDeclaration(program, analyzer, node, workflowFiles, result.malformed);
      if (workflow !== null) result.workflows.push(workflow);
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return result;
}

function readDeclaration(
  program: AnalysisProgram,
  analyzer: PurityAnalyzer,
  call: ts.CallExpression,
  workflowFiles: ReadonlySet<string>,
  malformed: MalformedDeclaration[],
): WorkflowModel | null {
  // Which workflow version this is, as far as it can be read, for LF009: a version whose
  // declaration is malformed is not "no longer declared".
  const identity = workflowIdentity(call);
  const reportedBefore = malformed.length;
  /** Says which workflow version the problems reported while reading it are of, as far as known. */
  const identify = (): null => {
    for (let i = reportedBefore; i < malformed.length; i++) {
      const m = malformed[i]!;
      if (identity !== undefined && m.workflow === undefined) malformed[i] = { ...m, workflow: identity };
    }
    return null;
  };
  const report = (node: ts.Node, message: string): null => {
    malformed.push({ location: program.location(node), message });
    return identify();
  };

  // Walk up the chain: workflow(...).step(...).external(...)
  const stepCalls: StepCall[] = [];
  let top: ts.Expression = call;
  for (;;) {
    const access = top.parent;
    if (!ts.isPropertyAccessExpression(access) || access.expression !== top) break;
    const invocation = access.parent;
    if (!ts.isCallExpression(invocation) || invocation.expression !== access) {
      return report(
        access.name,
        `\`.${access.name.text}\` is read from a workflow instead of called; keep the whole declaration one chain of step method calls (${STEP_METHODS}).`,
      );
    }
    const method = access.name.text;
    if (!(STEP_KINDS as readonly string[]).includes(method)) {
      return report(
        access.name,
        `\`.${method}(...)\` is not a step method; a workflow chain may only call ${STEP_METHODS}.`,
      );
    }
    stepCalls.push({ kind: method as StepKind, call: invocation, method: access.name });
    top = invocation;
  }
  top = outermostWrapper(top).outer as ts.Expression;

  const exportName = exportedConstName(top);
  if (exportName === null) {
    return report(
      call,
      'declare the workflow as an exported module-level const with all its steps in one chain ' +
        '(`export const myWorkflow = workflow(...).step(...)`), so codegen can read it and generated contracts can import it.',
    );
  }

  const [nameArgument, optionsArgument] = call.arguments;
  const nameNode = nameArgument === undefined ? undefined : skipWrappers(nameArgument);
  if (nameNode === undefined || !(ts.isStringLiteral(nameNode) || ts.isNoSubstitutionTemplateLiteral(nameNode))) {
    return report(
      nameArgument ?? call,
      `the name of workflow \`${exportName}\` must be a string literal (e.g. workflow('order-payment', { version: 1, input })); codegen reads it without running your code.`,
    );
  }
  const name = nameNode.text;
  if (!WORKFLOW_NAME.test(name)) {
    return report(
      nameNode,
      `workflow name "${name}" is invalid: use lower-case letters, digits and -, starting with a letter (max 63 characters).`,
    );
  }
  const options = optionsArgument === undefined ? undefined : skipWrappers(optionsArgument);
  if (options === undefined || !ts.isObjectLiteralExpression(options)) {
    return report(
      optionsArgument ?? call,
      `the options of workflow "${name}" must be an object literal with a literal version, e.g. { version: 1, input: z.object({ ... }) }.`,
    );
  }
  const versionProperty = options.properties.find(
    (p): p is ts.PropertyAssignment => ts.isPropertyAssignment(p) && propertyName(p) === 'version',
  );
  const versionValue = versionProperty === undefined ? undefined : skipWrappers(versionProperty.initializer);
  const version = versionValue !== undefined && ts.isNumericLiteral(versionValue) ? Number(versionValue.text) : NaN;
  if (versionProperty === undefined || !Number.isInteger(version) || version < 1) {
    return report(
      versionProperty ?? options,
      `the version of workflow "${name}" must be a literal integer >= 1 (e.g. version: 1); runs, migrations and contracts are pinned to it.`,
    );
  }

  const parts: PinnedPart[] = [];
  let ok = true;
  const input = options.properties.find((p) => propertyName(p) === 'input');
  if (input !== undefined) {
    const part = pinPart(program, input, 'input', null, `the input schema of workflow "${name}"`, malformed);
    if (part === null) ok = false;
    else parts.push(part);
  }
  // Each run's queue slot, with the parts it pins (the queue's declaration, the partition key).
  let queue: QueueUseModel | undefined;
  const queueProperty = options.properties.find((p) => propertyName(p) === 'queue');
  if (queueProperty !== undefined) {
    const read = readQueueUse(
      program,
      analyzer,
      queueProperty,
      { workflow: name, step: null, context: runContext() },
      malformed,
    );
    if (read === null) {
      ok = false;
    } else {
      queue = read.use;
      parts.push(...read.parts);
    }
  }
  const steps: StepModel[] = [];
  const inputShape = schemaShape(program, input === undefined ? null : assignedValue(input));
  const scope = { workflow: name, inputShape, workflowFiles, queue: queue?.queue.name ?? null };
  for (const stepCall of stepCalls) {
    const step = readStep(program, analyzer, scope, stepCall, steps, malformed);
    if (step === null) {
      ok = false;
    } else {
      steps.push(step.model);
      parts.push(...step.parts);
    }
  }
  if (!ok) return identify();
  const compensateOnCancel = readCompensateOnCancel(options);
  if (compensateOnCancel === null) {
    return report(
      options.properties.find((p) => propertyName(p) === 'compensateOnCancel')!,
      `compensateOnCancel of workflow "${name}" must be the literal true or false; it is part of the version's shape.`,
    );
  }
  return {
    name,
    version,
    exportName,
    file: program.relativePath(call.getSourceFile().fileName),
    location: program.location(call),
    versionLocation: program.location(versionProperty),
    steps: withCompensationPositions(steps),
    ...(queue === undefined ? {} : { queue }),
    ...(compensateOnCancel ? { compensateOnCancel: true as const } : {}),
    parts,
  };
}

/** `compensateOnCancel` of the workflow options: its literal value, false when absent, null when not a literal. */
function readCompensateOnCancel(options: ts.ObjectLiteralExpression): boolean | null {
  const property = options.properties.find((p) => propertyName(p) === 'compensateOnCancel');
  if (property === undefined) return false;
  const value = ts.isPropertyAssignment(property) ? skipWrappers(property.initializer) : undefined;
  if (value?.kind === ts.SyntaxKind.TrueKeyword) return true;
  return value?.kind === ts.SyntaxKind.FalseKeyword ? false : null;
}

/**
 * The steps with their compensations' positions: after the steps, in the order compensations run
 * (the last declared step's first), as the runtime numbers them (dsl `Workflow.compensations`).
 */
function withCompensationPositions(steps: readonly StepModel[]): StepModel[] {
  let next = steps.length;
  const positions = new Map<string, number>();
  for (const step of [...steps].reverse()) if (step.compensation !== undefined) positions.set(step.name, next++);
  return steps.map((step) =>
    step.compensation === undefined
      ? step
      : { ...step, compensation: { ...step.compensation, position: positions.get(step.name)! } },
  );
}
