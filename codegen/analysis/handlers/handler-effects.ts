// The effect analysis of one handler function: which database writes it makes and through
// what (`ctx.tx`, something from outside its context, or something it cannot tell), which
// objects from outside its context it calls methods on, whether it calls `fetch`, and whether it
// reads `ctx.key`. It follows helper functions (same file or relative imports; transitively,
// guarding recursion) the way the key analysis does. Conservative: what it cannot resolve it
// leaves out; it never guesses that something is a write.
//
// Long because it is one recursive walk whose origin tracking (what a value comes from), helper
// following and effect recording share the walk's state (its frame, the memo of followed
// helpers, the recursion guard); split apart, every piece would have to pass that state to the
// others. What does not need it is beside it: the SQL it recognises in handler-sql.ts.

import { ts } from 'ts-morph';
import type { ClientCall, DatabaseWrite, EffectSite, HandlerEffects, WriteChannel } from '../../model/handler-model.js';
import type { ViaHop } from '../../model/purity.js';
import { resolveRelativeModule, type AnalysisProgram } from '../analysis-program.js';
import { importBindingOf, resolveImportedDeclaration } from '../module-exports.js';
import {
  constFunction,
  declarationNameNode,
  isFunctionLike,
  isReference,
  isTypeOnly,
  isWithin,
  memberName,
  outermostWrapper,
  shortText,
  skipWrappers,
  variableKeyword,
  type FunctionLike,
} from '../syntax.js';
import {
  DATABASE_METHODS,
  isKyselySqlTag,
  isWriteSql,
  kyselyRawSqlText,
  sqlTextOf,
  TEXT_QUERY_METHODS,
  TRANSACTION_METHODS,
  WRITE_BUILDERS,
} from './handler-sql.js';

/**
 * Where a value comes from, as far as effects are concerned: the handler's context (`ctx`), its
 * transaction (`ctx.tx` and what is derived from it), its key, another part of the context, an
 * object from outside the context (a closure's or module's binding, or what a call on one
 * returned), or something the analysis cannot tell.
 */
type Origin =
  | { readonly kind: 'ctx' }
  | { readonly kind: 'tx' }
  | { readonly kind: 'key' }
  | { readonly kind: 'ctx-part' }
  | {
      readonly kind: 'outside';
      /** Identity of the object, the same wherever it is reached from. */
      readonly client: string;
      /** As written (`services.email`). */
      readonly text: string;
      /** The result of a call on (or of) the object, not the object itself. */
      readonly derived: boolean;
    }
  | { readonly kind: 'unknown' };

const UNKNOWN: Origin = { kind: 'unknown' };

interface Draft {
  readonly writes: DatabaseWrite[];
  readonly clientCalls: ClientCall[];
  readonly databaseClients: Set<string>;
  readonly fetches: EffectSite[];
  readsKey: boolean;
}

interface Frame {
  readonly scope: ts.Node;
  readonly bindings: ReadonlyMap<ts.ParameterDeclaration, Origin>;
  readonly draft: Draft;
  /** Arguments handed to a followed helper: the helper decides what reading them amounts to. */
  readonly boundArguments: Set<ts.Node>;
}

/** Packages whose `fetch` (default or named export) is the global one's twin. */
const FETCH_MODULES: ReadonlySet<string> = new Set(['node-fetch', 'undici', 'cross-fetch', 'isomorphic-fetch']);
const PROMISE_COMBINATORS: ReadonlySet<string> = new Set(['all', 'allSettled', 'race', 'any']);
const MAX_ARGUMENT_TEXT = 40;

/**
 * Analyses handler functions whose first parameter is the handler's context. One analyser serves
 * a codegen run: what it learns about helpers is memoised by the origins of their arguments.
 *
 * @example
 * const effects = new HandlerEffectAnalyzer(program).analyze(recordPaymentHandler);
 * effects.writes.filter((w) => w.through === 'outside'); // writes that bypass ctx.tx
 */
export class HandlerEffectAnalyzer {
  readonly #program: AnalysisProgram;
  readonly #memo = new Map<ts.Node, Map<string, Draft>>();
  readonly #active = new Set<ts.Node>();
  #cuts = 0;

  constructor(program: AnalysisProgram) {
    this.#program = program;
  }

  analyze(fn: FunctionLike): HandlerEffects {
    const bindings = new Map<ts.ParameterDeclaration, Origin>();
    const parameter = fn.parameters[0];
    if (parameter !== undefined) bindings.set(parameter, { kind: 'ctx' });
    this.#active.add(fn);
    try {
      const draft = this.#analyzeScope(fn, bindings);
      return {
        writes: withoutRepeats(draft.writes),
        clientCalls: withoutRepeats(draft.clientCalls),
        databaseClients: [...draft.databaseClients].sort(),
        fetches: withoutRepeats(draft.fetches),
        readsKey: draft.readsKey,
      };
    } finally {
      this.#active.delete(fn);
    }
  }

  #analyzeScope(fn: FunctionLike, bindings: ReadonlyMap<ts.ParameterDeclaration, Origin>): Draft {
    const draft: Draft = { writes: [], clientCalls: [], databaseClients: new Set(), fetches: [], readsKey: false };
    const frame: Frame = { scope: fn, bindings, draft, boundArguments: new Set() };
    for (const parameter of fn.parameters) this.#walk(parameter, frame);
    if (fn.body !== undefined) this.#walk(fn.body, frame);
    return draft;
  }

  // ---- walking --------------------------------------------------------------------------------

  #walk(node: ts.Node, frame: Frame): void {
    if (isTypeOnly(node)) return;
    if (ts.isCallExpression(node)) {
      this.#visitCall(node, frame);
      return;
    }
    if (ts.isTaggedTemplateExpression(node)) {
      this.#visitTaggedTemplate(node, frame);
    } else if (ts.isIdentifier(node)) {
      if (isReference(node)) this.#visitReference(node, frame);
      return;
    } else if (ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node)) {
      if (this.#visitContextMember(node, frame)) return;
    }
    ts.forEachChild(node, (child) => this.#walk(child, frame));
  }

  /** `ctx.key` reads the key; `ctx[name]` may. Returns true when `node` reads a member of the context. */
  #visitContextMember(node: ts.PropertyAccessExpression | ts.ElementAccessExpression, frame: Frame): boolean {
    if (this.#originOf(node.expression, frame)?.kind !== 'ctx') return false;
    const member = memberName(node);
    if (member === null || member === 'key') frame.draft.readsKey = true;
    if (ts.isElementAccessExpression(node)) this.#walk(node.argumentExpression, frame);
    return true;
  }

  #visitReference(identifier: ts.Identifier, frame: Frame): void {
    const origin = this.#originOf(identifier, frame);
    if (origin?.kind === 'key') {
      frame.draft.readsKey = true;
      return;
    }
    if (origin?.kind !== 'ctx') return;
    // The whole context is used: handed to a helper that is followed (the helper decides), read
    // into a variable or destructured (its uses decide), or anything else — which may read the key.
    const { outer, parent } = outermostWrapper(identifier);
    if (frame.boundArguments.has(identifier) || frame.boundArguments.has(outer)) return;
    if (ts.isVariableDeclaration(parent) && parent.initializer === outer) return;
    frame.draft.readsKey = true;
  }

  #visitCall(call: ts.CallExpression, frame: Frame): void {
    const callee = skipWrappers(call.expression);
    if (ts.isPropertyAccessExpression(callee) || ts.isElementAccessExpression(callee)) {
      const member = memberName(callee);
      if (member !== null) this.#visitMethodCall(call, skipWrappers(callee.expression), member, frame);
      this.#walk(call.expression, frame);
    } else if (ts.isIdentifier(callee)) {
      this.#visitFunctionCall(call, callee, frame);
    } else {
      this.#walk(call.expression, frame);
    }
    for (const argument of call.arguments) this.#walk(argument, frame);
  }

  #visitMethodCall(call: ts.CallExpression, receiver: ts.Expression, member: string, frame: Frame): void {
    const namespaceHelper = this.#namespaceHelper(receiver, member);
    if (namespaceHelper !== null) {
      this.#followHelper(frame, call, `${(receiver as ts.Identifier).text}.${member}`, namespaceHelper, call.arguments);
      return;
    }
    const origin = this.#originOf(receiver, frame);
    const [first] = call.arguments;
    if (WRITE_BUILDERS.has(member)) {
      this.#write(frame, call, 'statement', origin, `${compactText(receiver)}.${member}(${argumentText(first)})`);
    } else if (TRANSACTION_METHODS.has(member) && origin?.kind !== 'tx' && opensTransaction(call)) {
      this.#write(
        frame,
        call,
        'transaction',
        origin,
        `${compactText(receiver)}.${member}(${first === undefined ? '' : '…'})`,
      );
    } else if (member === 'execute' && kyselyRawSqlText(this.#program, receiver) !== null) {
      if (isWriteSql(kyselyRawSqlText(this.#program, receiver) as string)) {
        const executor = first === undefined ? UNKNOWN : this.#originOf(first, frame);
        this.#write(frame, call, 'statement', executor, `${compactText(receiver)}.execute(${argumentText(first)})`);
      }
    } else if (TEXT_QUERY_METHODS.has(member) && first !== undefined && this.#writesSqlText(first)) {
      this.#write(frame, call, 'statement', origin, `${compactText(receiver)}.${member}(${argumentText(first)})`);
    }

    if (
      member === 'fetch' &&
      ts.isIdentifier(receiver) &&
      receiver.text === 'globalThis' &&
      this.#program.declarationOf(receiver) === undefined
    ) {
      frame.draft.fetches.push(this.#site(call, 'globalThis.fetch()'));
    }
    if (origin?.kind !== 'outside') return;
    if (DATABASE_METHODS.has(member)) {
      frame.draft.databaseClients.add(origin.client);
    } else if (!origin.derived) {
      frame.draft.clientCalls.push({
        ...this.#site(call, `${origin.text}.${member}()`),
        client: origin.client,
        clientText: origin.text,
        awaited: isAwaited(call),
      });
    }
  }

  /** SQL text that writes, written out (`'INSERT …'`, `{ text: 'UPDATE …' }`) or as a tagged template of a client's own tag. */
  #writesSqlText(argument: ts.Expression): boolean {
    const text =
      sqlTextOf(this.#program, argument) ?? kyselyRawSqlText(this.#program, argument) ?? taggedTemplateText(argument);
    return text !== null && isWriteSql(text);
  }

  #visitFunctionCall(call: ts.CallExpression, callee: ts.Identifier, frame: Frame): void {
    const declaration = this.#program.declarationOf(callee);
    if (declaration === undefined) {
      if (callee.text === 'fetch') frame.draft.fetches.push(this.#site(call, 'fetch()'));
      return;
    }
    // A function declared inside the analysed one is walked as part of it.
    if (isWithin(declaration, frame.scope)) return;
    const binding = importBindingOf(declaration);
    if (
      binding !== null &&
      FETCH_MODULES.has(binding.specifier) &&
      (binding.importedName === 'default' || binding.importedName === 'fetch')
    ) {
      frame.draft.fetches.push(this.#site(call, `${callee.text}()`));
      return;
    }
    const helper = this.#helperOf(declaration, 0);
    if (helper !== null) this.#followHelper(frame, call, callee.text, helper, call.arguments);
  }

  /** `await sql\`INSERT …\`` through a client whose tag runs the query (postgres.js, @vercel/postgres); Kysely's `sql` runs nothing. */
  #visitTaggedTemplate(node: ts.TaggedTemplateExpression, frame: Frame): void {
    if (isKyselySqlTag(this.#program, node.tag)) return;
    const text = taggedTemplateText(node);
    if (text === null || !isWriteSql(text)) return;
    if (!ts.isAwaitExpression(outermostWrapper(node).parent)) return;
    const origin = this.#originOf(node.tag, frame);
    if (origin === null) return;
    this.#write(frame, node, 'statement', origin, compactText(node));
  }

  #write(frame: Frame, node: ts.Node, what: DatabaseWrite['what'], origin: Origin | null, text: string): void {
    const through: WriteChannel = origin?.kind === 'tx' ? 'tx' : origin?.kind === 'outside' ? 'outside' : 'unknown';
    frame.draft.writes.push({
      ...this.#site(node, text),
      what,
      through,
      handle: origin?.kind === 'outside' ? origin.text : null,
    });
  }

  #site(node: ts.Node, text: string): EffectSite {
    const location = this.#program.location(node);
    return { at: location, origin: location, text, via: [] };
  }

  // ---- helpers --------------------------------------------------------------------------------

  /** The function a called name refers to: a function or const arrow in this file or exported by a relative module. */
  #helperOf(declaration: ts.Declaration, depth: number): FunctionLike | null {
    if (depth > 8) return null;
    if (ts.isFunctionDeclaration(declaration)) return declaration.body === undefined ? null : declaration;
    if (ts.isVariableDeclaration(declaration)) return constFunction(declaration);
    const binding = importBindingOf(declaration);
    if (binding === null) return null;
    const target = resolveImportedDeclaration(
      this.#program,
      declaration.getSourceFile().fileName,
      binding.specifier,
      binding.importedName,
    );
    return target === null ? null : this.#helperOf(target, depth + 1);
  }

  /** `helpers.save(...)` with `import * as helpers from './helpers.js'`: the function it names, if it can be followed. */
  #namespaceHelper(receiver: ts.Expression, member: string): FunctionLike | null {
    if (!ts.isIdentifier(receiver)) return null;
    const declaration = this.#program.declarationOf(receiver);
    const binding = declaration === undefined ? null : importBindingOf(declaration);
    if (binding === null || binding.importedName !== '*' || !binding.specifier.startsWith('.')) return null;
    const target = resolveImportedDeclaration(
      this.#program,
      receiver.getSourceFile().fileName,
      binding.specifier,
      member,
    );
    return target === null ? null : this.#helperOf(target, 1);
  }

  #followHelper(
    frame: Frame,
    call: ts.CallExpression,
    name: string,
    helper: FunctionLike,
    args: readonly ts.Expression[],
  ): void {
    if (helper.body === undefined) return;
    const bindings = new Map<ts.ParameterDeclaration, Origin>();
    helper.parameters.forEach((parameter, index) => {
      const argument = args[index];
      if (argument === undefined || parameter.dotDotDotToken !== undefined || ts.isSpreadElement(argument)) return;
      const origin = this.#originOf(argument, frame);
      if (origin !== null) {
        bindings.set(parameter, origin);
        frame.boundArguments.add(skipWrappers(argument));
      }
    });
    if (this.#active.has(helper)) {
      this.#cuts++;
      return;
    }
    const signature = JSON.stringify(helper.parameters.map((p) => bindings.get(p) ?? null));
    let byBindings = this.#memo.get(helper);
    let inner = byBindings?.get(signature);
    if (inner === undefined) {
      const cuts = this.#cuts;
      this.#active.add(helper);
      try {
        inner = this.#analyzeScope(helper, bindings);
      } finally {
        this.#active.delete(helper);
      }
      if (cuts === this.#cuts) {
        if (byBindings === undefined) this.#memo.set(helper, (byBindings = new Map()));
        byBindings.set(signature, inner);
      }
    }
    const hop: ViaHop = {
      kind: 'helper',
      name: `${name}()`,
      declaredAt: this.#program.location(declarationNameNode(helper)),
    };
    const at = this.#program.location(call);
    const draft = frame.draft;
    for (const write of inner.writes) draft.writes.push({ ...write, at, via: [hop, ...write.via] });
    for (const clientCall of inner.clientCalls)
      draft.clientCalls.push({ ...clientCall, at, via: [hop, ...clientCall.via] });
    for (const fetch of inner.fetches) draft.fetches.push({ ...fetch, at, via: [hop, ...fetch.via] });
    for (const client of inner.databaseClients) draft.databaseClients.add(client);
    draft.readsKey ||= inner.readsKey;
  }

  // ---- origins --------------------------------------------------------------------------------

  /** Where the value of `expression` comes from inside `frame`; null when it is none of the tracked kinds (a literal, a global). */
  #originOf(expression: ts.Expression, frame: Frame, depth = 0): Origin | null {
    if (depth > 32) return UNKNOWN;
    const node = skipWrappers(expression);
    if (ts.isAwaitExpression(node)) return this.#originOf(node.expression, frame, depth + 1);
    if (ts.isIdentifier(node)) {
      const declaration = this.#program.declarationOf(node);
      if (declaration === undefined) return null;
      if (isWithin(declaration, frame.scope)) return this.#originOfLocal(declaration, frame, depth + 1);
      // A `let` or `var` from outside can be assigned anything, the context's transaction included.
      if (isReassignable(declaration)) return UNKNOWN;
      return { kind: 'outside', client: this.#identity(declaration, new Set()), text: node.text, derived: false };
    }
    if (ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node)) {
      const parent = this.#originOf(node.expression, frame, depth + 1);
      return parent === null ? null : childOrigin(parent, memberName(node));
    }
    if (ts.isCallExpression(node)) {
      const givenContext = node.arguments.some((argument) => isContextual(this.#originOf(argument, frame, depth + 1)));
      const callee = skipWrappers(node.expression);
      if (ts.isPropertyAccessExpression(callee) || ts.isElementAccessExpression(callee)) {
        const receiver = this.#originOf(callee.expression, frame, depth + 1);
        if (receiver === null) return null;
        if (givenContext && receiver.kind === 'outside') return UNKNOWN;
        return receiver.kind === 'outside'
          ? { ...receiver, derived: true }
          : receiver.kind === 'tx'
            ? receiver
            : UNKNOWN;
      }
      if (ts.isIdentifier(callee)) {
        const declaration = this.#program.declarationOf(callee);
        if (declaration === undefined) return null;
        if (givenContext || isWithin(declaration, frame.scope)) return UNKNOWN;
        return {
          kind: 'outside',
          client: `${this.#identity(declaration, new Set())}()`,
          text: `${callee.text}()`,
          derived: true,
        };
      }
      return UNKNOWN;
    }
    if (ts.isNewExpression(node)) {
      const givenContext = (node.arguments ?? []).some((argument) =>
        isContextual(this.#originOf(argument, frame, depth + 1)),
      );
      if (givenContext) return UNKNOWN;
      const location = this.#program.location(node);
      return {
        kind: 'outside',
        client: `new@${location.file}:${location.line}:${location.col}`,
        text: cut(shortText(node)),
        derived: true,
      };
    }
    if (ts.isConditionalExpression(node)) {
      return sameOrigin(
        this.#originOf(node.whenTrue, frame, depth + 1),
        this.#originOf(node.whenFalse, frame, depth + 1),
      );
    }
    if (
      ts.isBinaryExpression(node) &&
      (node.operatorToken.kind === ts.SyntaxKind.QuestionQuestionToken ||
        node.operatorToken.kind === ts.SyntaxKind.BarBarToken)
    ) {
      return sameOrigin(this.#originOf(node.left, frame, depth + 1), this.#originOf(node.right, frame, depth + 1));
    }
    return null;
  }

  /** The origin of a parameter, destructured element or variable declared inside the analysed function. */
  #originOfLocal(declaration: ts.Declaration, frame: Frame, depth: number): Origin | null {
    if (depth > 32) return UNKNOWN;
    if (ts.isParameter(declaration)) return frame.bindings.get(declaration) ?? UNKNOWN;
    if (ts.isBindingElement(declaration)) {
      const pattern = declaration.parent;
      const owner = pattern.parent;
      let parent: Origin | null;
      if (ts.isParameter(owner)) parent = frame.bindings.get(owner) ?? UNKNOWN;
      else if (ts.isVariableDeclaration(owner)) parent = this.#originOfVariable(owner, frame, depth + 1);
      else if (ts.isBindingElement(owner)) parent = this.#originOfLocal(owner, frame, depth + 1);
      else parent = UNKNOWN;
      if (parent === null) return null;
      if (declaration.dotDotDotToken !== undefined) return parent;
      if (ts.isArrayBindingPattern(pattern)) return childOrigin(parent, null);
      const property = declaration.propertyName ?? declaration.name;
      return childOrigin(parent, ts.isIdentifier(property) || ts.isStringLiteral(property) ? property.text : null);
    }
    if (ts.isVariableDeclaration(declaration)) return this.#originOfVariable(declaration, frame, depth + 1);
    return null;
  }

  /** A local `const`'s origin is its initializer's; a `let` or `var` can be reassigned, so it is unknown. */
  #originOfVariable(declaration: ts.VariableDeclaration, frame: Frame, depth: number): Origin | null {
    if (declaration.initializer === undefined) return UNKNOWN;
    if (variableKeyword(declaration) !== 'const') return UNKNOWN;
    return this.#originOf(declaration.initializer, frame, depth);
  }

  /**
   * The identity of an object declared outside the analysed function, the same however it is
   * reached: an import is its module and export; a `const` alias (`const { email } = services`,
   * `const mail = services.email`) is what it aliases; anything else is its declaration.
   */
  #identity(declaration: ts.Declaration, seen: Set<ts.Node>): string {
    const own = (): string => {
      const location = this.#program.location(declarationNameNode(declaration));
      return `${location.file}:${location.line}:${location.col}`;
    };
    if (seen.has(declaration) || seen.size > 16) return own();
    seen.add(declaration);
    const binding = importBindingOf(declaration);
    if (binding !== null) {
      const target = binding.specifier.startsWith('.')
        ? resolveRelativeModule(declaration.getSourceFile().fileName, binding.specifier)
        : null;
      return `import:${target === null ? binding.specifier : this.#program.relativePath(target)}#${binding.importedName}`;
    }
    if (ts.isVariableDeclaration(declaration) && ts.isIdentifier(declaration.name)) {
      if (variableKeyword(declaration) !== 'const' || declaration.initializer === undefined) return own();
      return this.#aliasIdentity(declaration.initializer, [], seen) ?? own();
    }
    if (ts.isBindingElement(declaration)) {
      const path: string[] = [];
      let element: ts.BindingElement = declaration;
      for (;;) {
        if (element.dotDotDotToken !== undefined || !ts.isObjectBindingPattern(element.parent)) return own();
        const property = element.propertyName ?? element.name;
        if (!ts.isIdentifier(property) && !ts.isStringLiteral(property)) return own();
        path.unshift(property.text);
        const owner = element.parent.parent;
        if (ts.isBindingElement(owner)) {
          element = owner;
          continue;
        }
        if (ts.isVariableDeclaration(owner) && variableKeyword(owner) === 'const' && owner.initializer !== undefined) {
          return this.#aliasIdentity(owner.initializer, path, seen) ?? own();
        }
        return own();
      }
    }
    return own();
  }

  /** The identity of `a.b.c` plus `path`, when `expression` is such a chain of static members; else null. */
  #aliasIdentity(expression: ts.Expression, path: readonly string[], seen: Set<ts.Node>): string | null {
    const members: string[] = [];
    let node = skipWrappers(expression);
    while (ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node)) {
      const member = memberName(node);
      if (member === null) return null;
      members.unshift(member);
      node = skipWrappers(node.expression);
    }
    if (!ts.isIdentifier(node)) return null;
    const declaration = this.#program.declarationOf(node);
    if (declaration === undefined) return null;
    return [this.#identity(declaration, seen), ...members, ...path].join('.');
  }
}

/** The origin of `member` of a value with origin `parent`; member null when computed. */
function childOrigin(parent: Origin, member: string | null): Origin {
  switch (parent.kind) {
    case 'ctx':
      if (member === 'tx') return { kind: 'tx' };
      if (member === 'key') return { kind: 'key' };
      return { kind: 'ctx-part' };
    case 'outside':
      if (parent.derived) return parent;
      return member === null
        ? { ...parent, derived: true }
        : { kind: 'outside', client: `${parent.client}.${member}`, text: `${parent.text}.${member}`, derived: false };
    default:
      return parent;
  }
}

/** A `let` or `var` variable, or an element destructured into one. */
function isReassignable(declaration: ts.Declaration): boolean {
  let node: ts.Node = declaration;
  while (ts.isBindingElement(node) || ts.isObjectBindingPattern(node) || ts.isArrayBindingPattern(node))
    node = node.parent;
  return ts.isVariableDeclaration(node) && variableKeyword(node) !== 'const';
}

/** Whether a value carries (part of) the handler's context. */
function isContextual(origin: Origin | null): boolean {
  return (
    origin !== null &&
    (origin.kind === 'ctx' || origin.kind === 'tx' || origin.kind === 'key' || origin.kind === 'ctx-part')
  );
}

function sameOrigin(a: Origin | null, b: Origin | null): Origin | null {
  if (a === null && b === null) return null;
  if (a === null || b === null) return UNKNOWN;
  if (a.kind === 'outside' && b.kind === 'outside') return a.client === b.client ? a : UNKNOWN;
  return a.kind === b.kind ? a : UNKNOWN;
}

/** `db.transaction()` (Kysely) or `db.transaction(async (trx) => ...)` (knex, drizzle): a transaction of its own. */
function opensTransaction(call: ts.CallExpression): boolean {
  if (call.arguments.length === 0) return true;
  const [first] = call.arguments;
  return call.arguments.length === 1 && first !== undefined && isFunctionLike(skipWrappers(first));
}

/** The leading text of a tagged template (any tag), or null for anything else. */
function taggedTemplateText(expression: ts.Expression): string | null {
  const node = skipWrappers(expression);
  if (!ts.isTaggedTemplateExpression(node)) return null;
  return ts.isNoSubstitutionTemplateLiteral(node.template) ? node.template.text : node.template.head.text;
}

/** The call's result is waited for: awaited, returned, chained with `.then`, or awaited in `Promise.all([...])`. */
function isAwaited(call: ts.CallExpression): boolean {
  const { outer, parent } = outermostWrapper(call);
  if (ts.isAwaitExpression(parent) || ts.isReturnStatement(parent)) return true;
  if (ts.isArrowFunction(parent) && parent.body === outer) return true;
  if (
    ts.isPropertyAccessExpression(parent) &&
    parent.expression === outer &&
    ['then', 'catch', 'finally'].includes(parent.name.text)
  ) {
    return true;
  }
  if (ts.isArrayLiteralExpression(parent) && ts.isCallExpression(parent.parent)) {
    const combinator = skipWrappers(parent.parent.expression);
    return (
      ts.isPropertyAccessExpression(combinator) &&
      ts.isIdentifier(combinator.expression) &&
      combinator.expression.text === 'Promise' &&
      PROMISE_COMBINATORS.has(combinator.name.text)
    );
  }
  return false;
}

function argumentText(argument: ts.Expression | undefined): string {
  return argument === undefined ? '' : compactText(argument);
}

/** An expression's text on one line, a chain's line breaks dropped (`db\n  .withSchema('s')` is `db.withSchema('s')`), cut short. */
function compactText(node: ts.Node): string {
  return cut(
    node
      .getText()
      .replace(/\s*\n\s*(?=\??\.)/g, '')
      .replace(/\s+/g, ' '),
  );
}

function cut(text: string): string {
  return text.length > MAX_ARGUMENT_TEXT ? `${text.slice(0, MAX_ARGUMENT_TEXT - 1)}…` : text;
}

/** Drops an effect met again the same way (same place and text), e.g. through two paths. */
function withoutRepeats<T extends EffectSite>(sites: readonly T[]): T[] {
  const seen = new Set<string>();
  return sites.filter((site) => {
    const id = JSON.stringify([site.at, site.origin, site.text]);
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}
