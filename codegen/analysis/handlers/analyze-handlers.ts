// The handler analysis: finds the calls of generated binders (`orderPaymentHandlers<DB>({...})`)
// in the handler modules, resolves the handler of each step, and records what each one does
// (HandlerEffectAnalyzer) as plain data for the handler rules (LF010–LF012).

import { ts } from 'ts-morph';
import { isBuiltInKind, type HandlerStepKind } from '../../../dsl/step-kind.js';
import { generatedModuleOf } from '../../discovery/discover-handler-modules.js';
import { contractNames } from '../../emit/naming.js';
import type { HandlerAnalysis, HandlerBindingModel, HandlerModel } from '../../model/handler-model.js';
import { compareLocations } from '../../model/source-location.js';
import { stepsAndCompensations, type WorkflowModel } from '../../model/workflow-model.js';
import type { AnalysisProgram } from '../analysis-program.js';
import { importBindingOf, resolveImportedDeclaration } from '../module-exports.js';
import { assignedValue } from '../property-values.js';
import { isFunctionLike, propertyName, skipWrappers, variableKeyword, type FunctionLike } from '../syntax.js';
import { HandlerEffectAnalyzer } from './handler-effects.js';

/**
 * Analyses the handler modules (absolute paths) bound through the contracts in `generatedDir`
 * (absolute) against the workflows analysis found. A binder is recognised by its import: a
 * relative specifier naming `<generatedDir>/contracts/<name>.v<N>` (or the generated index) and
 * the binder name codegen gives workflow `name` v`N` — so handler modules are analysed even
 * before their contracts are generated, and a binder of a workflow codegen does not know (or
 * could not read) is skipped.
 *
 * @example
 * const handlers = analyzeHandlers(program, ['/repo/src/refund.handlers.ts'], '/repo/generated', analysis.workflows);
 * handlers.bindings[0]?.handlers.map((h) => h.step); // ['findCharge', 'refundCharge', 'markRefunded']
 */
export function analyzeHandlers(
  program: AnalysisProgram,
  modules: readonly string[],
  generatedDir: string,
  workflows: readonly WorkflowModel[],
): HandlerAnalysis {
  const analyzer = new HandlerEffectAnalyzer(program);
  const bindings: HandlerBindingModel[] = [];
  for (const file of modules) {
    const sourceFile = program.sourceFile(file);
    if (sourceFile === undefined) continue;
    for (const { call, workflow } of binderCalls(program, sourceFile, generatedDir, workflows)) {
      bindings.push(readBinding(program, analyzer, call, workflow));
    }
  }
  bindings.sort((a, b) => compareLocations(a.location, b.location));
  return { modules: modules.map((file) => program.relativePath(file)).sort(), bindings };
}

interface BinderCall {
  readonly call: ts.CallExpression;
  readonly workflow: WorkflowModel;
}

/** The calls in a module of binders it imports from generated contracts (or the index). */
function binderCalls(
  program: AnalysisProgram,
  sourceFile: ts.SourceFile,
  generatedDir: string,
  workflows: readonly WorkflowModel[],
): BinderCall[] {
  /** Named imports of binders → their workflow; namespace imports → the workflows they offer. */
  const named = new Map<ts.Node, WorkflowModel>();
  const namespaces = new Map<ts.Node, readonly WorkflowModel[]>();
  for (const statement of sourceFile.statements) {
    if (!ts.isImportDeclaration(statement) || !ts.isStringLiteral(statement.moduleSpecifier)) continue;
    const clause = statement.importClause;
    if (clause === undefined || clause.isTypeOnly) continue;
    const specifier = statement.moduleSpecifier.text;
    if (!specifier.startsWith('.')) continue;
    const module = generatedModuleOf(sourceFile.fileName, specifier, generatedDir);
    if (module === null) continue;
    const offered =
      module.kind === 'index'
        ? workflows
        : workflows.filter((w) => w.name === module.workflow && w.version === module.version);
    const bindings = clause.namedBindings;
    if (bindings === undefined) continue;
    if (ts.isNamespaceImport(bindings)) {
      namespaces.set(bindings, offered);
      continue;
    }
    for (const element of bindings.elements) {
      if (element.isTypeOnly) continue;
      const workflow = binderOf(offered, (element.propertyName ?? element.name).text);
      if (workflow !== null) named.set(element, workflow);
    }
  }
  if (named.size === 0 && namespaces.size === 0) return [];

  const calls: BinderCall[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node)) {
      const workflow = calledBinder(program, node, named, namespaces);
      if (workflow !== null) calls.push({ call: node, workflow });
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return calls;
}

/** The workflow whose binder is exported under `name`, if exactly one of `offered` has it. */
function binderOf(offered: readonly WorkflowModel[], name: string): WorkflowModel | null {
  const matching = offered.filter((workflow) => contractNames(workflow).bind === name);
  return matching.length === 1 ? (matching[0] as WorkflowModel) : null;
}

function calledBinder(
  program: AnalysisProgram,
  call: ts.CallExpression,
  named: ReadonlyMap<ts.Node, WorkflowModel>,
  namespaces: ReadonlyMap<ts.Node, readonly WorkflowModel[]>,
): WorkflowModel | null {
  const callee = skipWrappers(call.expression);
  if (ts.isIdentifier(callee)) {
    const declaration = program.declarationOf(callee);
    return declaration === undefined ? null : (named.get(declaration) ?? null);
  }
  if (ts.isPropertyAccessExpression(callee) && ts.isIdentifier(callee.expression)) {
    const declaration = program.declarationOf(callee.expression);
    const offered = declaration === undefined ? undefined : namespaces.get(declaration);
    return offered === undefined ? null : binderOf(offered, callee.name.text);
  }
  return null;
}

/**
 * One binder call: the handler of every step and compensation whose property codegen can read. Steps of the
 * built-in kinds (sleep, waitFor, child, forEach) take no handler: a property named after one is
 * not looked at.
 */
function readBinding(
  program: AnalysisProgram,
  analyzer: HandlerEffectAnalyzer,
  call: ts.CallExpression,
  workflow: WorkflowModel,
): HandlerBindingModel {
  const handlers: HandlerModel[] = [];
  const [argument] = call.arguments;
  const object = argument === undefined ? null : objectLiteralOf(program, argument, new Set());
  for (const property of object?.properties ?? []) {
    const name = propertyName(property);
    const step = name === null ? undefined : stepsAndCompensations(workflow).find((s) => s.name === name);
    if (step === undefined) continue;
    const kind = step.kind;
    if (isBuiltInKind(kind)) continue;
    const handler = handlerFunction(program, property, kind);
    if (handler === null) continue;
    handlers.push({
      step: step.name,
      kind,
      location: program.location(handler.name),
      effects: analyzer.analyze(handler.fn),
    });
  }
  return { workflow: workflow.name, version: workflow.version, location: program.location(call), handlers };
}

/**
 * The function to analyse for a step's property, and the name to point at: the handler itself
 * for `step` and `transactional`, its `perform` for `external`. Null when it is not statically
 * a function (a call that builds one, a parameter, a package's export).
 */
function handlerFunction(
  program: AnalysisProgram,
  property: ts.ObjectLiteralElementLike,
  kind: HandlerStepKind,
): { fn: FunctionLike; name: ts.Node } | null {
  if (kind !== 'external') {
    const fn = ts.isMethodDeclaration(property) ? property : functionOf(program, assignedValue(property), new Set());
    return fn === null ? null : { fn, name: property.name ?? property };
  }
  const value = assignedValue(property);
  const object = value === null ? null : objectLiteralOf(program, value, new Set());
  const perform = object?.properties.find((p) => propertyName(p) === 'perform');
  if (perform === undefined) return null;
  const fn = ts.isMethodDeclaration(perform) ? perform : functionOf(program, assignedValue(perform), new Set());
  return fn === null ? null : { fn, name: perform.name ?? perform };
}

/** The function an expression is, or names: inline, a function or const in this file, or one a relative module exports. */
function functionOf(
  program: AnalysisProgram,
  expression: ts.Expression | null,
  seen: Set<ts.Node>,
): FunctionLike | null {
  if (expression === null) return null;
  const node = skipWrappers(expression);
  if (isFunctionLike(node)) return node;
  if (!ts.isIdentifier(node)) return null;
  const declaration = declarationOf(program, node, seen);
  if (declaration === null) return null;
  if (ts.isFunctionDeclaration(declaration)) return declaration.body === undefined ? null : declaration;
  if (
    ts.isVariableDeclaration(declaration) &&
    declaration.initializer !== undefined &&
    variableKeyword(declaration) === 'const'
  ) {
    return functionOf(program, declaration.initializer, seen);
  }
  return null;
}

/** The object literal an expression is, or a `const` (here or exported by a relative module) holds. */
function objectLiteralOf(
  program: AnalysisProgram,
  expression: ts.Expression,
  seen: Set<ts.Node>,
): ts.ObjectLiteralExpression | null {
  const node = skipWrappers(expression);
  if (ts.isObjectLiteralExpression(node)) return node;
  if (!ts.isIdentifier(node)) return null;
  const declaration = declarationOf(program, node, seen);
  if (
    declaration === null ||
    !ts.isVariableDeclaration(declaration) ||
    declaration.initializer === undefined ||
    variableKeyword(declaration) !== 'const'
  ) {
    return null;
  }
  return objectLiteralOf(program, declaration.initializer, seen);
}

/** The declaration a name refers to, through relative imports; null for globals, packages and cycles. */
function declarationOf(program: AnalysisProgram, identifier: ts.Identifier, seen: Set<ts.Node>): ts.Declaration | null {
  const declaration = program.declarationOf(identifier);
  if (declaration === undefined || seen.has(declaration) || seen.size > 16) return null;
  seen.add(declaration);
  const binding = importBindingOf(declaration);
  if (binding === null) return declaration;
  return resolveImportedDeclaration(
    program,
    identifier.getSourceFile().fileName,
    binding.specifier,
    binding.importedName,
  );
}
