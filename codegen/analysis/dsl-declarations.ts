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
  return (
    specifier === 'ledgerflow/dsl' || /(^|\/)dsl(\/(index|workflow|event|queue|schedule))?(\.(js|ts))?$/.test(specifier)
  );
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
export function isDslCall(
  program: AnalysisProgram,
  call: ts.CallExpression,
  imports: DslImports,
  fn: DslFunction,
): boolean {
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
export function workflowIdentity(
  call: ts.CallExpression,
): { readonly name: string; readonly version: number | null } | undefined {
  const [nameArgument, optionsArgument] = call.arguments;
  const nameNode = nameArgument === undefined ? undefined : skipWrappers(nameArgument);
  if (nameNode === undefined || !(ts.isStringLiteral(nameNode) || ts.isNoSubstitutionTemplateLiteral(nameNode)))
    return undefined;
  const options = optionsArgument === undefined ? undefined : skipWrappers(optionsArgument);
  const versionProperty =
    options !== undefined && ts.isObjectLiteralExpression(options)
      ? options.properties.find(
          (p): p is ts.PropertyAssignment => ts.isPropertyAssignment(p) && propertyName(p) === 'version',
        )
      : undefined;
  const versionValue = versionProperty === undefined ? undefined : skipWrappers(versionProperty.initializer);
  const version = versionValue !== undefined && ts.isNumericLiteral(versionValue) ? Number(versionValue.text) : NaN;
  return { name: nameNode.text, version: Number.isInteger(version) && version >= 1 ? version : null };
}

/** Why codegen cannot read a reference, and what to write instead (the caller reports it where the reference is). */
export interface ReferenceProblem {
  readonly problem: string;
}

/**
 * What differs between reading an `event(...)` and a `queue(...)` reference: the function, how
 * its declaration looks, what codegen reads from it, and its name rule. The messages are built
 * from these, so both readers say the same things in the same words.
 */
interface NamedDeclarationKind {
  readonly fn: 'event' | 'queue';
  /** The call as messages show it: `event('name', schema)`. */
  readonly signature: string;
  /** A whole declaration to copy. */
  readonly example: string;
  /** A call with a literal name: `event('payment.settled', schema)`. */
  readonly literalExample: string;
  /** What codegen reads it for: `read the event's name and generate its sender`. */
  readonly purpose: string;
  /** What a package's declaration keeps codegen from doing: `neither read the event's name nor generate its sender`. */
  readonly cannot: string;
  readonly nameRule: RegExp;
  readonly maxNameLength: number;
  /** Why it must be exported, after `export it (export const x = fn(...))`. */
  readonly whyExported: string;
}

const EVENT_KIND: NamedDeclarationKind = {
  fn: 'event',
  signature: "event('name', schema)",
  example: "export const paymentSettled = event('payment.settled', z.object({ ... }))",
  literalExample: "event('payment.settled', schema)",
  purpose: "read the event's name and generate its sender",
  cannot: "neither read the event's name nor generate its sender",
  nameRule: EVENT_NAME,
  maxNameLength: 127,
  whyExported: ': the generated sender imports it.',
};

const QUEUE_KIND: NamedDeclarationKind = {
  fn: 'queue',
  signature: "queue('name', { ... })",
  example: "export const emailQueue = queue('email', { concurrency: 5 })",
  literalExample: "queue('email', { ... })",
  purpose: "read the queue's name and limits",
  cannot: "read neither the queue's name nor its limits",
  nameRule: QUEUE_NAME,
  maxNameLength: 63,
  whyExported:
    ' and import that const wherever the queue is used: a queue is declared once (a worker refuses one declared twice with different limits).',
};

/** A declaration read by {@link readNamedDeclaration}, with its call (for what only one kind reads). */
type NamedDeclaration = EventReference & { readonly call: ts.CallExpression };

/**
 * The `kind` declaration a property names: an exported const, in this file or a relative module,
 * declared with the DSL function with a literal, valid name. `value` is the property's value
 * (null when it has none: a method), `at` where messages point from, `subject` how they name the
 * property (`the event of step "settled"`).
 */
function readNamedDeclaration(
  program: AnalysisProgram,
  kind: NamedDeclarationKind,
  value: ts.Expression | null,
  at: ts.Node,
  subject: string,
): NamedDeclaration | ReferenceProblem {
  const lookup = lookUpConst(program, value);
  const write = `declare the ${kind.fn} once, as ${kind.example}, and refer to it by that name`;
  switch (lookup.kind) {
    case 'not-a-name':
      return {
        problem: `${subject} must be the name of a const declared with ${kind.signature}, so that codegen can ${kind.purpose}; ${write}.`,
      };
    case 'unresolved':
      return {
        problem: `${subject} is \`${lookup.name}\`, which codegen finds declared neither in this file nor in a relative import; ${write}.`,
      };
    case 'package':
      return {
        problem:
          `${subject} is \`${lookup.name}\`, imported from package "${lookup.specifier}": codegen cannot read a package's source, so it can ${kind.cannot} ` +
          `— declare the ${kind.fn} in this project (this file or a relative import).`,
      };
    case 'not-const':
      return { problem: `${subject} is \`${lookup.name}\`, which is not a const with a value; ${write}.` };
    case 'found':
      break;
  }
  const { declaration, name } = lookup;
  const where = describeLocation(program.location(declaration), program.location(at));
  const call = skipWrappers(declaration.initializer);
  const imports = dslImports(declaration.getSourceFile(), kind.fn);
  if (!ts.isCallExpression(call) || !isDslCall(program, call, imports, kind.fn)) {
    return {
      problem: `${subject} is \`${name}\` (${where}), which is not declared with ${kind.signature} from ledgerflow/dsl; ${write}.`,
    };
  }
  const [nameArgument] = call.arguments;
  const nameNode = nameArgument === undefined ? undefined : skipWrappers(nameArgument);
  if (nameNode === undefined || !(ts.isStringLiteral(nameNode) || ts.isNoSubstitutionTemplateLiteral(nameNode))) {
    return {
      problem: `${subject} is \`${name}\` (${where}), whose ${kind.fn} name is not a string literal; write it out (${kind.literalExample}): codegen reads it without running your code.`,
    };
  }
  if (!kind.nameRule.test(nameNode.text)) {
    return {
      problem:
        `${subject} is \`${name}\` (${where}), whose ${kind.fn} name "${nameNode.text}" is invalid: use lower-case letters, digits, ".", "_" and "-", ` +
        `starting with a letter (max ${kind.maxNameLength} characters).`,
    };
  }
  const exportName = exportedConstName(declaration.initializer);
  if (exportName === null) {
    return {
      problem: `${subject} is \`${name}\` (${where}), which its module does not export; export it (export const ${name} = ${kind.fn}(...))${kind.whyExported}`,
    };
  }
  return {
    name: nameNode.text,
    exportName,
    file: program.relativePath(declaration.getSourceFile().fileName),
    location: program.location(call),
    call,
  };
}

/**
 * The event a `waitFor` step's `event` property names, declared with `event('name', schema)` —
 * the generated sender imports it. See {@link readNamedDeclaration}.
 */
export function readEventReference(
  program: AnalysisProgram,
  value: ts.Expression | null,
  at: ts.Node,
  subject: string,
): EventReference | ReferenceProblem {
  const read = readNamedDeclaration(program, EVENT_KIND, value, at, subject);
  if ('problem' in read) return read;
  const { call: _call, ...reference } = read;
  return reference;
}

/**
 * The queue a queue use's `queue` property names (`queue: { queue: emailQueue }` on a workflow or
 * a step), declared with `queue('name', { ... })` — its name is part of the shape; its limits are
 * read for REVIEW.md, not pinned. See {@link readNamedDeclaration}.
 */
export function readQueueReference(
  program: AnalysisProgram,
  value: ts.Expression | null,
  at: ts.Node,
  subject: string,
): QueueReference | ReferenceProblem {
  const read = readNamedDeclaration(program, QUEUE_KIND, value, at, subject);
  if ('problem' in read) return read;
  const { call, ...reference } = read;
  const limits = call.arguments[1];
  return { ...reference, limitsText: limits === undefined ? null : limits.getText() };
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
  const write =
    "pass the const of a workflow declared in a *.workflow.ts file (export const shipment = workflow('shipment', { version: 1, input }).step(...))";
  switch (lookup.kind) {
    case 'not-a-name':
      return {
        problem: `${subject} must be the name of a workflow const, so that codegen can read which workflow version it starts; ${write}.`,
      };
    case 'unresolved':
      return {
        problem: `${subject} is \`${lookup.name}\`, which codegen finds declared neither in this file nor in a relative import; ${write}.`,
      };
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
  if (call === null)
    return {
      problem: `${subject} is \`${name}\` (${where}), which is not declared with workflow(...) from ledgerflow/dsl; ${write}.`,
    };
  const identity = workflowIdentity(call);
  const exportName = exportedConstName(declaration.initializer);
  if (identity === undefined || identity.version === null || exportName === null) {
    return {
      problem: `${subject} is \`${name}\` (${where}), which codegen cannot read (see the error reported at its declaration); fix that declaration.`,
    };
  }
  if (!workflowFiles.has(declaration.getSourceFile().fileName)) {
    return {
      problem:
        `${subject} is \`${name}\`, declared in ${program.relativePath(declaration.getSourceFile().fileName)}, which is not one of the workflow files codegen reads ` +
        '(**/*.workflow.ts unless --include says otherwise); declare it in one, so that it gets its contract and migration and workers can run it.',
    };
  }
  if (identity.name === parent) {
    return {
      problem: `${subject} is workflow "${parent}" itself; a workflow cannot start itself as a child — declare the part to repeat as a workflow of its own.`,
    };
  }
  return {
    name: identity.name,
    version: identity.version,
    exportName,
    file: program.relativePath(declaration.getSourceFile().fileName),
  };
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
  | {
      readonly kind: 'found';
      readonly name: string;
      readonly declaration: ts.VariableDeclaration & { readonly initializer: ts.Expression };
    }
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
    if (binding !== null && !binding.specifier.startsWith('.'))
      return { kind: 'package', name, specifier: binding.specifier };
    declaration =
      binding === null ? local : resolveImportedDeclaration(program, fromFile, binding.specifier, binding.importedName);
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
  if (
    !ts.isVariableDeclaration(declaration) ||
    variableKeyword(declaration) !== 'const' ||
    declaration.initializer === undefined
  ) {
    return { kind: 'not-const', name };
  }
  return {
    kind: 'found',
    name,
    declaration: declaration as ts.VariableDeclaration & { readonly initializer: ts.Expression },
  };
}
