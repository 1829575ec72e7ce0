// Recognising the DSL's declarations — `workflow(...)`, `event(...)`, `queue(...)` and
// `schedule(...)` calls of the functions a file imports from ledgerflow/dsl — and reading what a
// step refers to by name: the event a `waitFor` waits for, the workflow a `child` or `forEach`
// starts, the queue a workflow or a step holds a slot of. All are read without running anything: a reference codegen cannot
// follow is a problem to report (LF008), never a guess.

import { ts } from 'ts-morph';
import { EVENT_NAME } from '../../dsl/event.js';
import { QUEUE_NAME } from '../../dsl/queue.js';
import { describeLocation } from '../model/source-location.js';
import type { EventReference, QueueReference, WorkflowReference } from '../model/workflow-model.js';
import type { AnalysisProgram } from './analysis-program.js';
import { importBindingOf, namespaceImportOf, resolveImportedDeclaration } from './module-exports.js';
import { exportedConstName, propertyName, skipWrappers, variableKeyword } from './syntax.js';

/** The DSL functions codegen reads calls of. */
export type DslFunction = 'workflow' | 'event' | 'queue' | 'schedule';

/** How a file imports one DSL function: named imports of it, and namespaces that offer it. */
export interface DslImports {
  readonly functions: ReadonlySet<ts.ImportSpecifier>;
  readonly namespaces: ReadonlySet<string>;
}

function isDslModule(specifier: string): boolean {
  return specifier === 'ledgerflow/dsl' || /(^|\/)dsl(\/(index|workflow|event|queue|schedule))?(\.(js|ts))?$/.test(specifier);
}

/** How `sourceFile` imports `fn` from the DSL (type-only imports do not count). */
export function dslImports(sourceFile: ts.SourceFile, fn: DslFunction): DslImports {
  const functions = new Set<ts.ImportSpecifier>();
  const namespaces = new Set<string>();
  for (const statement of sourceFile.statements) {
    if (!ts.isImportDeclaration(statement) || !ts.isStringLiteral(statement.moduleSpecifier)) continue;
    if (!isDslModule(statement.moduleSpecifier.text) || statement.importClause?.isTypeOnly) continue;
    const bindings = statement.importClause?.namedBindings;
    if (bindings === undefined) continue;
    if (ts.isNamespaceImport(bindings)) {
      namespaces.add(bindings.name.text);
    } else {
      for (const element of bindings.elements) {
        if ((element.propertyName ?? element.name).text === fn && !element.isTypeOnly) functions.add(element);
      }
    }
  }
  return { functions, namespaces };
}

/** Whether `call` calls the DSL function `fn` that `imports` (from `dslImports(…, fn)`) describe. */
export function isDslCall(program: AnalysisProgram, call: ts.CallExpression, imports: DslImports, fn: DslFunction): boolean {
  const callee = call.expression;
  if (ts.isIdentifier(callee)) {
    const declaration = program.declarationOf(callee);
    return declaration !== undefined && ts.isImportSpecifier(declaration) && imports.functions.has(declaration);
  }
  return (
    ts.isPropertyAccessExpression(callee) &&
    callee.name.text === fn &&
    ts.isIdentifier(callee.expression) &&
    imports.namespaces.has(callee.expression.text)
  );
}

/** The name and version of a `workflow(...)` call where they are literals (version null when it is not); undefined without a literal name. */
export function workflowIdentity(call: ts.CallExpression): { readonly name: string; readonly version: number | null } | undefined {
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

/** Why codegen cannot read a reference, and what to write instead (the caller reports it where the reference is). */
export interface ReferenceProblem {
  readonly problem: string;
}

const EVENT_EXAMPLE = "export const paymentSettled = event('payment.settled', z.object({ ... }))";

/**
 * The event a `waitFor` step's `event` property names: an exported const, in this file or a
 * relative module, declared with `event('name', schema)` — the generated sender imports it.
 * `value` is the property's value (null when it has none: a method), `at` where messages point
 * from, `subject` how they name the property (`the event of step "settled"`).
 */
export function readEventReference(
  program: AnalysisProgram,
  value: ts.Expression | null,
  at: ts.Node,
  subject: string,
): EventReference | ReferenceProblem {
  const lookup = lookUpConst(program, value);
  const write = `declare the event once, as ${EVENT_EXAMPLE}, and refer to it by that name`;
  switch (lookup.kind) {
    case 'not-a-name':
      return { problem: `${subject} must be the name of a const declared with event('name', schema), so that codegen can read the event's name and generate its sender; ${write}.` };
    case 'unresolved':
      return { problem: `${subject} is \`${lookup.name}\`, which codegen finds declared neither in this file nor in a relative import; ${write}.` };
    case 'package':
      return {
        problem:
          `${subject} is \`${lookup.name}\`, imported from package "${lookup.specifier}": codegen cannot read a package's source, so it can neither ` +
          `read the event's name nor generate its sender — declare the event in this project (this file or a relative import).`,
      };
    case 'not-const':
      return { problem: `${subject} is \`${lookup.name}\`, which is not a const with a value; ${write}.` };
    case 'found':
      break;
  }
  const { declaration, name } = lookup;
  const where = describeLocation(program.location(declaration), program.location(at));
  const call = skipWrappers(declaration.initializer);
  const imports = dslImports(declaration.getSourceFile(), 'event');
  if (!ts.isCallExpression(call) || !isDslCall(program, call, imports, 'event')) {
    return { problem: `${subject} is \`${name}\` (${where}), which is not declared with event('name', schema) from ledgerflow/dsl; ${write}.` };
  }
  const [nameArgument] = call.arguments;
  const nameNode = nameArgument === undefined ? undefined : skipWrappers(nameArgument);
  if (nameNode === undefined || !(ts.isStringLiteral(nameNode) || ts.isNoSubstitutionTemplateLiteral(nameNode))) {
    return {
      problem: `${subject} is \`${name}\` (${where}), whose event name is not a string literal; write it out (event('payment.settled', schema)): codegen reads it without running your code.`,
    };
  }
  if (!EVENT_NAME.test(nameNode.text)) {
    return {
      problem: `${subject} is \`${name}\` (${where}), whose event name "${nameNode.text}" is invalid: use lower-case letters, digits, ".", "_" and "-", starting with a letter (max 127 characters).`,
    };
  }
  const exportName = exportedConstName(declaration.initializer);
  if (exportName === null) {
    return { problem: `${subject} is \`${name}\` (${where}), which its module does not export; export it (export const ${name} = event(...)): the generated sender imports it.` };
  }
  return {
    name: nameNode.text,
    exportName,
    file: program.relativePath(declaration.getSourceFile().fileName),
    location: program.location(call),
  };
}

const QUEUE_EXAMPLE = "export const emailQueue = queue('email', { concurrency: 5 })";

/**
 * The queue a queue use's `queue` property names (`queue: { queue: emailQueue }` on a workflow or
 * a step): an exported const, in this file or a relative module, declared with
 * `queue('name', { ... })` — its name is part of the shape; its limits are read for REVIEW.md, not
 * pinned. `value`, `at` and `subject` as for readEventReference (`the queue of step "send"`).
 */
export function readQueueReference(
  program: AnalysisProgram,
  value: ts.Expression | null,
  at: ts.Node,
  subject: string,
): QueueReference | ReferenceProblem {
  const lookup = lookUpConst(program, value);
  const write = `declare the queue once, as ${QUEUE_EXAMPLE}, and refer to it by that name`;
  switch (lookup.kind) {
    case 'not-a-name':
      return { problem: `${subject} must be the name of a const declared with queue('name', { ... }), so that codegen can read the queue's name and limits; ${write}.` };
    case 'unresolved':
      return { problem: `${subject} is \`${lookup.name}\`, which codegen finds declared neither in this file nor in a relative import; ${write}.` };
    case 'package':
      return {
        problem:
          `${subject} is \`${lookup.name}\`, imported from package "${lookup.specifier}": codegen cannot read a package's source, so it can read neither ` +
          `the queue's name nor its limits — declare the queue in this project (this file or a relative import).`,
      };
    case 'not-const':
      return { problem: `${subject} is \`${lookup.name}\`, which is not a const with a value; ${write}.` };
    case 'found':
      break;
  }
  const { declaration, name } = lookup;
  const where = describeLocation(program.location(declaration), program.location(at));
  const call = skipWrappers(declaration.initializer);
  const imports = dslImports(declaration.getSourceFile(), 'queue');
  if (!ts.isCallExpression(call) || !isDslCall(program, call, imports, 'queue')) {
    return { problem: `${subject} is \`${name}\` (${where}), which is not declared with queue('name', { ... }) from ledgerflow/dsl; ${write}.` };
  }
  const [nameArgument, limitsArgument] = call.arguments;
  const nameNode = nameArgument === undefined ? undefined : skipWrappers(nameArgument);
  if (nameNode === undefined || !(ts.isStringLiteral(nameNode) || ts.isNoSubstitutionTemplateLiteral(nameNode))) {
    return {
      problem: `${subject} is \`${name}\` (${where}), whose queue name is not a string literal; write it out (queue('email', { ... })): codegen reads it without running your code.`,
    };
  }
  if (!QUEUE_NAME.test(nameNode.text)) {
    return {
      problem: `${subject} is \`${name}\` (${where}), whose queue name "${nameNode.text}" is invalid: use lower-case letters, digits, ".", "_" and "-", starting with a letter (max 63 characters).`,
    };
  }
  const exportName = exportedConstName(declaration.initializer);
  if (exportName === null) {
    return {
      problem:
        `${subject} is \`${name}\` (${where}), which its module does not export; export it (export const ${name} = queue(...)) and import that const wherever the queue is used: ` +
        'a queue is declared once (a worker refuses one declared twice with different limits).',
    };
  }
  return {
    name: nameNode.text,
    exportName,
    file: program.relativePath(declaration.getSourceFile().fileName),
    location: program.location(call),
    limitsText: limitsArgument === undefined ? null : limitsArgument.getText(),
  };
}

/**
 * The workflow a `child` step's second argument or a `forEach` step's `workflow` names: a
 * `workflow(...)` chain exported by one of the workflow files codegen reads (`workflowFiles`,
 * absolute), whose name and version are literals. `parent` is the workflow of the step (a workflow
 * cannot start itself).
 */
export function readWorkflowReference(
  program: AnalysisProgram,
  value: ts.Expression | null,
  at: ts.Node,
  subject: string,
  parent: string,
  workflowFiles: ReadonlySet<string>,
): WorkflowReference | ReferenceProblem {
  const lookup = lookUpConst(program, value);
  const write = "pass the const of a workflow declared in a *.workflow.ts file (export const shipment = workflow('shipment', { version: 1, input }).step(...))";
  switch (lookup.kind) {
    case 'not-a-name':
      return { problem: `${subject} must be the name of a workflow const, so that codegen can read which workflow version it starts; ${write}.` };
    case 'unresolved':
      return { problem: `${subject} is \`${lookup.name}\`, which codegen finds declared neither in this file nor in a relative import; ${write}.` };
    case 'package':
      return {
        problem:
          `${subject} is \`${lookup.name}\`, imported from package "${lookup.specifier}": codegen cannot read which workflow version it is, ` +
          `and this project generates no migration for it; ${write}.`,
      };
    case 'not-const':
      return { problem: `${subject} is \`${lookup.name}\`, which is not a const with a value; ${write}.` };
    case 'found':
      break;
  }
  const { declaration, name } = lookup;
  const where = describeLocation(program.location(declaration), program.location(at));
  const call = workflowCallOf(program, declaration.initializer);
  if (call === null) return { problem: `${subject} is \`${name}\` (${where}), which is not declared with workflow(...) from ledgerflow/dsl; ${write}.` };
  const identity = workflowIdentity(call);
  const exportName = exportedConstName(declaration.initializer);
  if (identity === undefined || identity.version === null || exportName === null) {
    return { problem: `${subject} is \`${name}\` (${where}), which codegen cannot read (see the error reported at its declaration); fix that declaration.` };
  }
  if (!workflowFiles.has(declaration.getSourceFile().fileName)) {
    return {
      problem:
        `${subject} is \`${name}\`, declared in ${program.relativePath(declaration.getSourceFile().fileName)}, which is not one of the workflow files codegen reads ` +
        '(**/*.workflow.ts unless --include says otherwise); declare it in one, so that it gets its contract and migration and workers can run it.',
    };
  }
  if (identity.name === parent) {
    return { problem: `${subject} is workflow "${parent}" itself; a workflow cannot start itself as a child — declare the part to repeat as a workflow of its own.` };
  }
  return { name: identity.name, version: identity.version, exportName, file: program.relativePath(declaration.getSourceFile().fileName) };
}

/** The `workflow(...)` call at the bottom of a step chain (`workflow(...).step(...)...`), or null. */
function workflowCallOf(program: AnalysisProgram, initializer: ts.Expression): ts.CallExpression | null {
  const imports = dslImports(initializer.getSourceFile(), 'workflow');
  let node = skipWrappers(initializer);
  while (ts.isCallExpression(node)) {
    if (isDslCall(program, node, imports, 'workflow')) return node;
    if (!ts.isPropertyAccessExpression(node.expression)) return null;
    node = skipWrappers(node.expression.expression);
  }
  return null;
}

type ConstLookup =
  | { readonly kind: 'found'; readonly name: string; readonly declaration: ts.VariableDeclaration & { readonly initializer: ts.Expression } }
  | { readonly kind: 'not-a-name' }
  | { readonly kind: 'unresolved'; readonly name: string }
  | { readonly kind: 'package'; readonly name: string; readonly specifier: string }
  | { readonly kind: 'not-const'; readonly name: string };

/** The const a name (`paymentSettled`) or a namespace import's member (`events.paymentSettled`) refers to, through relative imports. */
function lookUpConst(program: AnalysisProgram, value: ts.Expression | null): ConstLookup {
  if (value === null) return { kind: 'not-a-name' };
  const node = skipWrappers(value);
  const fromFile = node.getSourceFile().fileName;
  let name: string;
  let declaration: ts.Declaration | null;
  if (ts.isIdentifier(node)) {
    name = node.text;
    const local = program.declarationOf(node);
    if (local === undefined) return { kind: 'unresolved', name };
    const binding = importBindingOf(local);
    if (binding !== null && !binding.specifier.startsWith('.')) return { kind: 'package', name, specifier: binding.specifier };
    declaration = binding === null ? local : resolveImportedDeclaration(program, fromFile, binding.specifier, binding.importedName);
  } else if (ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.expression)) {
    name = `${node.expression.text}.${node.name.text}`;
    const local = program.declarationOf(node.expression);
    const binding = local === undefined ? null : namespaceImportOf(local);
    if (binding === null) return { kind: 'not-a-name' };
    if (!binding.specifier.startsWith('.')) return { kind: 'package', name, specifier: binding.specifier };
    declaration = resolveImportedDeclaration(program, fromFile, binding.specifier, node.name.text);
  } else {
    return { kind: 'not-a-name' };
  }
  if (declaration === null) return { kind: 'unresolved', name };
  if (!ts.isVariableDeclaration(declaration) || variableKeyword(declaration) !== 'const' || declaration.initializer === undefined) {
    return { kind: 'not-const', name };
  }
  return { kind: 'found', name, declaration: declaration as ts.VariableDeclaration & { readonly initializer: ts.Expression } };
}
