import { ts } from 'ts-morph';
import { STEP_NAME, WORKFLOW_NAME } from '../../dsl/names.js';
import { STEP_KINDS, type StepKind } from '../../dsl/step-kind.js';
import { describePart, STEP_FUNCTION_PARTS, type PartKind, type PinnedPart } from '../model/pinned-parts.js';
import type { MalformedDeclaration, KeyModel, StepModel, WorkflowModel } from '../model/workflow-model.js';
import type { AnalysisProgram } from './analysis-program.js';
import { keyContext, keyModel } from './key-model.js';
import { importBindingOf, resolveImportedDeclaration } from './module-exports.js';
import { PinnedSources } from './pinned-source.js';
import type { PurityAnalyzer } from './purity-analyzer.js';
import {
  constFunction,
  hasExportModifier,
  outermostWrapper,
  propertyName,
  skipWrappers,
  variableKeyword,
  type FunctionLike,
} from './syntax.js';

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
): FileAnalysis {
  const result: FileAnalysis = { workflows: [], malformed: [] };
  const imports = dslImports(sourceFile);
  if (imports.functions.size === 0 && imports.namespaces.size === 0) return result;
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) && isWorkflowCall(program, node, imports)) {
      const workflow = readDeclaration(program, analyzer, node, result.malformed);
      if (workflow !== null) result.workflows.push(workflow);
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return result;
}

interface DslImports {
  readonly functions: Set<ts.ImportSpecifier>;
  readonly namespaces: Set<string>;
}

function isDslModule(specifier: string): boolean {
  return specifier === 'ledgerflow/dsl' || /(^|\/)dsl(\/(index|workflow))?(\.(js|ts))?$/.test(specifier);
}

function dslImports(sourceFile: ts.SourceFile): DslImports {
  const imports: DslImports = { functions: new Set(), namespaces: new Set() };
  for (const statement of sourceFile.statements) {
    if (!ts.isImportDeclaration(statement) || !ts.isStringLiteral(statement.moduleSpecifier)) continue;
    if (!isDslModule(statement.moduleSpecifier.text) || statement.importClause?.isTypeOnly) continue;
    const bindings = statement.importClause?.namedBindings;
    if (bindings === undefined) continue;
    if (ts.isNamespaceImport(bindings)) {
      imports.namespaces.add(bindings.name.text);
    } else {
      for (const element of bindings.elements) {
        if ((element.propertyName ?? element.name).text === 'workflow' && !element.isTypeOnly) imports.functions.add(element);
      }
    }
  }
  return imports;
}

function isWorkflowCall(program: AnalysisProgram, call: ts.CallExpression, imports: DslImports): boolean {
  const callee = call.expression;
  if (ts.isIdentifier(callee)) {
    const declaration = program.declarationOf(callee);
    return declaration !== undefined && ts.isImportSpecifier(declaration) && imports.functions.has(declaration);
  }
  return (
    ts.isPropertyAccessExpression(callee) &&
    callee.name.text === 'workflow' &&
    ts.isIdentifier(callee.expression) &&
    imports.namespaces.has(callee.expression.text)
  );
}

interface StepCall {
  readonly kind: StepKind;
  readonly call: ts.CallExpression;
  readonly method: ts.MemberName;
}

function readDeclaration(
  program: AnalysisProgram,
  analyzer: PurityAnalyzer,
  call: ts.CallExpression,
  malformed: MalformedDeclaration[],
): WorkflowModel | null {
  // Which workflow version this is, as far as it can be read, for LF009: a version whose
  // declaration is malformed is not "no longer declared".
  const identity = peekIdentity(call);
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
      return report(access.name, `\`.${access.name.text}\` is read from a workflow instead of called; keep the whole declaration one chain of .step/.transactional/.external calls.`);
    }
    const method = access.name.text;
    if (!(STEP_KINDS as readonly string[]).includes(method)) {
      return report(access.name, `\`.${method}(...)\` is not a step method; a workflow chain may only call .step, .transactional and .external.`);
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
    return report(nameNode, `workflow name "${name}" is invalid: use lower-case letters, digits and -, starting with a letter (max 63 characters).`);
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
  const steps: StepModel[] = [];
  for (const stepCall of stepCalls) {
    const step = readStep(program, analyzer, name, stepCall, steps, malformed);
    if (step === null) {
      ok = false;
    } else {
      steps.push(step.model);
      parts.push(...step.parts);
    }
  }
  if (!ok) return identify();
  return {
    name,
    version,
    exportName,
    file: program.relativePath(call.getSourceFile().fileName),
    location: program.location(call),
    versionLocation: program.location(versionProperty),
    steps,
    parts,
  };
}

/** The name and version of a `workflow(...)` call where they are literals, reporting nothing. */
function peekIdentity(call: ts.CallExpression): MalformedDeclaration['workflow'] {
  const [nameArgument, optionsArgument] = call.arguments;
  const nameNode = nameArgument === undefined ? undefined : skipWrappers(nameArgument);
  if (nameNode === undefined || !(ts.isStringLiteral(nameNode) || ts.isNoSubstitutionTemplateLiteral(nameNode))) return undefined;
  const options = optionsArgument === undefined ? undefined : skipWrappers(optionsArgument);
  const versionProperty =
    options !== undefined && ts.isObjectLiteralExpression(options)
      ? options.properties.find((p): p is ts.PropertyAssignment => ts.isPropertyAssignment(p) && propertyName(p) === 'version')
      : undefined;
  const versionValue = versionProperty === undefined ? undefined : skipWrappers(versionProperty.initializer);
  const version = versionValue !== undefined && ts.isNumericLiteral(versionValue) ? Number(versionValue.text) : NaN;
  return { name: nameNode.text, version: Number.isInteger(version) && version >= 1 ? version : null };
}

function readStep(
  program: AnalysisProgram,
  analyzer: PurityAnalyzer,
  workflowName: string,
  { kind, call, method }: StepCall,
  earlier: readonly StepModel[],
  malformed: MalformedDeclaration[],
): { model: StepModel; parts: PinnedPart[] } | null {
  const position = earlier.length;
  const report = (node: ts.Node, message: string): null => {
    malformed.push({ location: program.location(node), message });
    return null;
  };
  const [nameArgument, configArgument] = call.arguments;
  const nameNode = nameArgument === undefined ? undefined : skipWrappers(nameArgument);
  if (nameNode === undefined || !(ts.isStringLiteral(nameNode) || ts.isNoSubstitutionTemplateLiteral(nameNode))) {
    return report(nameArgument ?? method, `step ${position + 1} of workflow "${workflowName}" needs a string literal name, e.g. .${kind}('charge', { ... }).`);
  }
  const name = nameNode.text;
  if (!STEP_NAME.test(name)) {
    return report(nameNode, `step name "${name}" is invalid: use letters, digits and _ (max 63 characters), starting with a letter or _.`);
  }
  const config = configArgument === undefined ? undefined : skipWrappers(configArgument);
  if (config === undefined || !ts.isObjectLiteralExpression(config)) {
    return report(configArgument ?? method, `the config of step "${name}" must be an object literal ({ output, key, ... }) so codegen can read its key.`);
  }
  const properties = new Map<string, ts.ObjectLiteralElementLike>();
  for (const property of config.properties) {
    if (ts.isSpreadAssignment(property)) {
      return report(property, `the config of step "${name}" uses a spread; write key, idempotentByKey and the other properties out so codegen can see them.`);
    }
    const key = propertyName(property);
    if (key !== null) properties.set(key, property);
  }

  let idempotentByKey = false;
  const idempotent = properties.get('idempotentByKey');
  if (idempotent !== undefined) {
    const value = ts.isPropertyAssignment(idempotent) ? skipWrappers(idempotent.initializer) : undefined;
    if (value === undefined || (value.kind !== ts.SyntaxKind.TrueKeyword && value.kind !== ts.SyntaxKind.FalseKeyword)) {
      return report(idempotent, `idempotentByKey of step "${name}" must be the literal true or false; it decides whether the handler must supply reconcile.`);
    }
    idempotentByKey = kind === 'external' && value.kind === ts.SyntaxKind.TrueKeyword;
  }

  let key: KeyModel | null = null;
  const keyProperty = properties.get('key');
  if (keyProperty !== undefined) {
    const keyFunction = resolveKeyFunction(program, keyProperty);
    if (keyFunction === 'absent') {
      key = null;
    } else if (keyFunction === null) {
      return report(
        keyProperty,
        `the key of step "${name}" must be a function — inline (({ input, steps }) => \`...\`) or the name of a function declared in this file or exported by a relative module — so codegen can check that it is pure.`,
      );
    } else {
      const report = analyzer.analyze(keyFunction, keyContext(earlier.map((step) => step.name)));
      key = keyModel(program, keyProperty, report);
    }
  }

  // What runs in flight depend on: the output schema and every function the runtime evaluates.
  const parts: PinnedPart[] = [];
  for (const kind of ['output', ...STEP_FUNCTION_PARTS] as const) {
    const property = properties.get(kind);
    if (property === undefined || (kind === 'key' && key === null)) continue;
    const part = pinPart(program, property, kind, name, describePart({ kind, step: name }), malformed);
    if (part === null) return null;
    parts.push(part);
  }

  const performTimeout = properties.get('performTimeoutMs');
  const model: StepModel = {
    name,
    kind,
    position,
    idempotentByKey,
    location: program.location(method),
    key,
    hasRequest: properties.has('request'),
    hasRetry: properties.has('retry'),
    performTimeoutText:
      performTimeout !== undefined && ts.isPropertyAssignment(performTimeout) ? performTimeout.initializer.getText() : null,
  };
  return { model, parts };
}

/**
 * Pins the part a property declares (its value; a method is its own value), or reports as
 * malformed (LF008) that codegen cannot read what it refers to.
 */
function pinPart(
  program: AnalysisProgram,
  property: ts.ObjectLiteralElementLike,
  kind: PartKind,
  step: string | null,
  subject: string,
  malformed: MalformedDeclaration[],
): PinnedPart | null {
  const value = ts.isPropertyAssignment(property) ? property.initializer : property;
  const pin = PinnedSources.of(program).pin(value, subject);
  if (pin.problem !== undefined) {
    malformed.push({ location: program.location(pin.problem.node), message: pin.problem.message });
    return null;
  }
  return { kind, step, hash: pin.hash, location: program.location(property.name ?? property) };
}

/** The function a `key` property names; 'absent' for `key: undefined`; null when it is not statically a function. */
function resolveKeyFunction(program: AnalysisProgram, property: ts.ObjectLiteralElementLike): FunctionLike | 'absent' | null {
  if (ts.isMethodDeclaration(property)) return property;
  let value: ts.Expression;
  if (ts.isPropertyAssignment(property)) value = skipWrappers(property.initializer);
  else if (ts.isShorthandPropertyAssignment(property)) value = property.name;
  else return null;
  if (ts.isArrowFunction(value) || ts.isFunctionExpression(value)) return value;
  if (!ts.isIdentifier(value)) return null;
  const declaration = program.declarationOf(value);
  if (declaration === undefined) return value.text === 'undefined' ? 'absent' : null;
  return functionOfDeclaration(program, declaration);
}

function functionOfDeclaration(program: AnalysisProgram, declaration: ts.Declaration): FunctionLike | null {
  if (ts.isFunctionDeclaration(declaration)) return declaration.body === undefined ? null : declaration;
  if (ts.isVariableDeclaration(declaration)) return constFunction(declaration);
  const binding = importBindingOf(declaration);
  if (binding === null) return null;
  const target = resolveImportedDeclaration(program, declaration.getSourceFile().fileName, binding.specifier, binding.importedName);
  return target === null ? null : functionOfDeclaration(program, target);
}

/** The exported name of the module-level const whose initializer is `expression`, if any. */
function exportedConstName(expression: ts.Expression): string | null {
  const declaration = expression.parent;
  if (!ts.isVariableDeclaration(declaration) || declaration.initializer !== expression || !ts.isIdentifier(declaration.name)) {
    return null;
  }
  if (variableKeyword(declaration) !== 'const') return null;
  const statement = declaration.parent.parent;
  if (!ts.isVariableStatement(statement) || !ts.isSourceFile(statement.parent)) return null;
  const localName = declaration.name.text;
  if (hasExportModifier(statement)) return localName;
  for (const other of statement.parent.statements) {
    if (ts.isExportDeclaration(other) && other.moduleSpecifier === undefined && !other.isTypeOnly) {
      const clause = other.exportClause;
      if (clause === undefined || !ts.isNamedExports(clause)) continue;
      const element = clause.elements.find((e) => (e.propertyName ?? e.name).text === localName);
      if (element !== undefined) return element.name.text;
    }
  }
  return null;
}
