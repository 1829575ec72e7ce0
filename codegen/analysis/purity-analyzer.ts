// The purity analysis: is a function pure over its context? Callers describe what the context
// parameter offers (a key's `({ input, steps })` with the steps declared before it) and get a
// plain-data PurityReport back; each caller maps its findings to its own rules (the key rules
// are codegen/validation/rules/*-key.ts and step-order.ts).
// Long because it is one recursive walk over a function and the helpers and constants it reaches,
// with one memo and one recursion guard for all of them; what does not need the walk's state is
// already beside it (purity-roots.ts, purity-summary.ts, pure-functions.ts, name-uses.ts).

import { ts } from 'ts-morph';
import type { ContextDescription, PurityReport } from '../model/purity.js';
import type { AnalysisProgram } from './analysis-program.js';
import { importBindingOf, namespaceImportOf } from './module-exports.js';
import { destructuredMember, globalUse, importUse, outerDeclarationUse, type NameUse } from './name-uses.js';
import {
  dateConstructorSource,
  impureMethod,
  intlDependsOnLocale,
  mutableInitializer,
  nondeterministicMember,
  PURE_GLOBAL_FUNCTIONS,
  PURE_NAMESPACES,
  STATEFUL_METHODS,
} from './pure-functions.js';
import { parameterRoot, rootOf, rootOfDeclaration, type Root } from './purity-roots.js';
import { emptySummary, SummaryRecorder, toReport, type Frame, type Summary } from './purity-summary.js';
import {
  declarationNameNode,
  isFunctionLike,
  isMutableLiteral,
  isReference,
  isTypeOnly,
  isWithin,
  memberName,
  shortText,
  skipWrappers,
  type FunctionLike,
} from './syntax.js';

/**
 * Decides whether a function is a pure function of its context. It walks the function's body,
 * follows helper functions and module constants (in the same file or relative imports;
 * transitively, guarding recursion), and records every read of the context plus every finding
 * (clock, randomness, environment, I/O, `await`, unknown calls, mutable state, invisible steps).
 *
 * Conservative by design: what it cannot prove pure is a finding, never silently accepted.
 * One analyser serves a whole codegen run: what it learns about helpers and constants is
 * memoised across the functions it analyses.
 *
 * @example
 * const analyzer = new PurityAnalyzer(program);
 * const report = analyzer.analyze(keyFunction, { data: ['input'], steps: { visible: ['load'] } });
 * report.findings.filter((f) => f.kind === 'nondeterministic'); // e.g. Date.now()
 */
export class PurityAnalyzer {
  readonly #program: AnalysisProgram;
  readonly #record: SummaryRecorder;
  readonly #helperMemo = new Map<ts.Node, Map<string, Summary>>();
  readonly #constMemo = new Map<ts.Node, Summary>();
  readonly #active = new Set<ts.Node>();
  /** The functions analysed for a caller, whose parameters are their contexts. */
  readonly #roots = new Set<ts.Node>();
  /**
   * Counts recursion cut-offs. A summary computed while a cut happened lacks what the cut-off
   * function contributes further up the cycle, so it must not be memoised for other callers.
   */
  #cuts = 0;

  constructor(program: AnalysisProgram) {
    this.#program = program;
    this.#record = new SummaryRecorder(program);
  }

  /** Analyses `fn`, whose first parameter is a context offering what `context` describes. */
  analyze(fn: FunctionLike, context: ContextDescription): PurityReport {
    const bindings = new Map<ts.ParameterDeclaration, Root>();
    const parameter = fn.parameters[0];
    if (parameter !== undefined) bindings.set(parameter, parameterRoot(parameter, context));
    this.#active.add(fn);
    this.#roots.add(fn);
    try {
      const summary = this.#analyzeScope(fn, bindings);
      const asyncModifier = ts.canHaveModifiers(fn)
        ? ts.getModifiers(fn)?.find((m) => m.kind === ts.SyntaxKind.AsyncKeyword)
        : undefined;
      if (asyncModifier !== undefined) {
        // The function the runtime calls returns a Promise: refused (the worker fails such an attempt for good).
        this.#record.nondeterministic(
          { scope: fn, bindings, summary, boundArguments: new Set() },
          asyncModifier,
          'async',
          'async',
        );
      }
      return toReport(summary, context);
    } finally {
      this.#active.delete(fn);
    }
  }

  #analyzeScope(scope: ts.Node, bindings: ReadonlyMap<ts.ParameterDeclaration, Root>): Summary {
    const frame: Frame = { scope, bindings, summary: emptySummary(), boundArguments: new Set() };
    if (isFunctionLike(scope)) {
      for (const parameter of scope.parameters) this.#walk(parameter, frame);
      if (scope.body !== undefined) this.#walk(scope.body, frame);
    } else {
      this.#walk(scope, frame);
    }
    return frame.summary;
  }

  // ---- walking --------------------------------------------------------------------------------

  #walk(node: ts.Node, frame: Frame): void {
    if (isTypeOnly(node)) return;
    if (ts.isAwaitExpression(node)) {
      this.#record.nondeterministic(frame, node, 'await', 'await');
    } else if (ts.isCallExpression(node)) {
      this.#visitCall(node, frame);
      return;
    } else if (ts.isNewExpression(node)) {
      this.#visitNew(node, frame);
      return;
    } else if (ts.isTaggedTemplateExpression(node)) {
      this.#visitTaggedTemplate(node, frame);
      return;
    } else if (ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node)) {
      this.#visitMemberRead(node, frame);
      return;
    } else if (ts.isIdentifier(node)) {
      if (isReference(node)) this.#visitReference(node, frame);
      return;
    } else if (node.kind === ts.SyntaxKind.ThisKeyword) {
      this.#record.mutableRead(frame, node, 'this', 'this', null);
    } else if (ts.isMetaProperty(node)) {
      this.#record.nondeterministic(frame, node, 'env', node.getText());
      return;
    } else if (ts.isTemplateSpan(node) && this.#isDate(node.expression, frame)) {
      // `${date}` is the Date's toString: local time.
      this.#record.nondeterministic(frame, node.expression, 'locale', `\`\${${shortText(node.expression)}}\``);
    }
    ts.forEachChild(node, (child) => this.#walk(child, frame));
  }

  /** Whether `expression` is known to be a Date: `new Date(...)`, or a local variable holding one. */
  #isDate(expression: ts.Expression, frame: Frame, depth = 0): boolean {
    const node = skipWrappers(expression);
    if (ts.isNewExpression(node)) {
      const callee = skipWrappers(node.expression);
      return ts.isIdentifier(callee) && callee.text === 'Date' && this.#program.declarationOf(callee) === undefined;
    }
    if (!ts.isIdentifier(node) || depth > 8) return false;
    const declaration = this.#program.declarationOf(node);
    return (
      declaration !== undefined &&
      ts.isVariableDeclaration(declaration) &&
      isWithin(declaration, frame.scope) &&
      declaration.initializer !== undefined &&
      this.#isDate(declaration.initializer, frame, depth + 1)
    );
  }

  #visitCall(call: ts.CallExpression, frame: Frame): void {
    const callee = skipWrappers(call.expression);
    const walkArguments = (): void => {
      for (const argument of call.arguments) this.#walk(argument, frame);
    };
    if (callee.kind === ts.SyntaxKind.ImportKeyword) {
      this.#record.nondeterministic(frame, call, 'io', 'import()');
      walkArguments();
      return;
    }
    if (ts.isIdentifier(callee)) {
      this.#visitFunctionCall(call, callee, frame);
      walkArguments();
      return;
    }
    const member = memberName(callee);
    if (member !== null && (ts.isPropertyAccessExpression(callee) || ts.isElementAccessExpression(callee))) {
      this.#visitMethodCall(call, callee, member, frame);
      walkArguments();
      return;
    }
    if (ts.isArrowFunction(callee) || ts.isFunctionExpression(callee)) {
      // An immediately invoked function is part of the analysed function's own body.
      ts.forEachChild(call, (child) => this.#walk(child, frame));
      return;
    }
    this.#record.impureCall(frame, call, `${shortText(callee)}()`);
    ts.forEachChild(call, (child) => this.#walk(child, frame));
  }

  #visitFunctionCall(call: ts.CallExpression, callee: ts.Identifier, frame: Frame): void {
    const declaration = this.#program.declarationOf(callee);
    if (declaration === undefined) {
      const date =
        callee.text === 'String' && call.arguments[0] !== undefined && this.#isDate(call.arguments[0], frame);
      if (date) this.#record.nondeterministic(frame, call, 'locale', shortText(call));
      else this.#use(frame, call, callee, globalUse(callee.text, true), call);
      return;
    }
    if (isWithin(declaration, frame.scope)) {
      // A function declared inside the function is walked as part of it; a parameter is an unknown function.
      if (ts.isParameter(declaration)) {
        // The context holds JSON, no function; a helper's or a local callback's parameter is
        // called with what its caller passed, which the caller's own walk has checked.
        if (this.#roots.has(declaration.parent)) this.#record.impureCall(frame, call, `${callee.text}()`);
        else frame.summary.calls.add(`${callee.text}()`);
      } else if (ts.isBindingElement(declaration)) {
        // `const { now } = Date; now()`: a global's member through an alias; anything else destructured is unknown.
        const owner = declaration.parent.parent;
        const initializer =
          ts.isVariableDeclaration(owner) && owner.initializer !== undefined
            ? skipWrappers(owner.initializer)
            : undefined;
        const member = destructuredMember(declaration);
        if (
          initializer !== undefined &&
          ts.isIdentifier(initializer) &&
          this.#program.declarationOf(initializer) === undefined &&
          member !== null
        ) {
          this.#globalMemberCall(
            frame,
            call,
            initializer.text,
            member,
            `${initializer.text}.${member} through the alias ${callee.text}()`,
          );
        } else {
          this.#record.impureCall(frame, call, `${callee.text}()`);
        }
      }
      return;
    }
    const binding = importBindingOf(declaration);
    const use =
      binding !== null
        ? importUse(this.#program, callee, binding, binding.importedName, true)
        : outerDeclarationUse(callee, declaration, true);
    this.#use(frame, call, callee, use, call);
  }

  #visitMethodCall(
    call: ts.CallExpression,
    callee: ts.PropertyAccessExpression | ts.ElementAccessExpression,
    member: string,
    frame: Frame,
  ): void {
    const receiver = skipWrappers(callee.expression);
    if (ts.isIdentifier(receiver)) {
      const declaration = this.#program.declarationOf(receiver);
      if (declaration === undefined) {
        this.#globalMemberCall(frame, call, receiver.text, member, `${receiver.text}.${member}()`);
        return;
      }
      const binding = importBindingOf(declaration);
      if (binding !== null && (namespaceImportOf(declaration) !== null || !binding.specifier.startsWith('.'))) {
        if (namespaceImportOf(declaration) !== null) {
          this.#use(frame, call, receiver, importUse(this.#program, receiver, binding, member, true), call);
        } else {
          // A package's value: its methods are its code, which codegen does not analyse.
          this.#record.impureCall(frame, call, `${shortText(callee)}()`, binding.specifier);
        }
        return;
      }
      if (
        !isWithin(declaration, frame.scope) &&
        ts.isVariableDeclaration(declaration) &&
        declaration.initializer !== undefined &&
        ts.isCallExpression(skipWrappers(declaration.initializer)) &&
        STATEFUL_METHODS.has(member)
      ) {
        // `const ids = makeIds(); ids.next()`: a value a call made, used through a method that reads or moves its state.
        this.#record.mutableRead(frame, receiver, 'mutable-instance', receiver.text, null, declaration);
        return;
      }
      if (
        !isWithin(declaration, frame.scope) &&
        (ts.isClassDeclaration(declaration) || ts.isFunctionDeclaration(declaration))
      ) {
        // A class's static method may read its static state; a function's own members are not its body.
        this.#record.impureCall(frame, call, `${shortText(callee)}()`);
        return;
      }
    }
    const source = impureMethod(member, call.arguments, this.#isDate(callee.expression, frame));
    if (source !== undefined) this.#record.nondeterministic(frame, call, source, `${shortText(callee)}()`);
    else frame.summary.calls.add(`.${member}()`);
    this.#walk(callee.expression, frame);
    if (ts.isElementAccessExpression(callee)) this.#walk(callee.argumentExpression, frame);
  }

  /**
   * `G.member(...)` on a global `G` (`text` is how a finding shows it): the clock, randomness or
   * the environment if NONDETERMINISTIC_MEMBERS says so, the locale for Intl without one, pure for
   * the rest of the standard library's namespaces; a global that is not part of it is unknown.
   */
  #globalMemberCall(frame: Frame, call: ts.CallExpression, global: string, member: string, text: string): void {
    const forbidden = nondeterministicMember(global, member);
    if (forbidden !== undefined) {
      this.#record.nondeterministic(frame, call, forbidden, text);
    } else if (global === 'Intl' && intlDependsOnLocale(member, call.arguments)) {
      this.#record.nondeterministic(frame, call, 'locale', text);
    } else if (PURE_NAMESPACES.has(global)) {
      frame.summary.calls.add(`${global}.${member}()`);
    } else {
      this.#record.impureCall(frame, call, text);
    }
  }

  #visitNew(node: ts.NewExpression, frame: Frame): void {
    const callee = skipWrappers(node.expression);
    const args = node.arguments ?? [];
    const isGlobal = (identifier: ts.Expression): identifier is ts.Identifier =>
      ts.isIdentifier(identifier) && this.#program.declarationOf(identifier) === undefined;
    if (isGlobal(callee)) {
      const name = callee.text;
      const forbidden =
        name === 'Date'
          ? dateConstructorSource(args.length)
          : name === 'Function'
            ? 'io'
            : nondeterministicMember(name, null);
      if (forbidden !== undefined) this.#record.nondeterministic(frame, node, forbidden, shortText(node));
      else if (PURE_GLOBAL_FUNCTIONS.has(name)) frame.summary.calls.add(`new ${name}()`);
      else this.#record.impureCall(frame, node, `new ${name}()`);
    } else if (
      ts.isPropertyAccessExpression(callee) &&
      isGlobal(callee.expression) &&
      callee.expression.text === 'Intl'
    ) {
      if (intlDependsOnLocale(callee.name.text, args))
        this.#record.nondeterministic(frame, node, 'locale', `new ${shortText(callee)}()`);
      else frame.summary.calls.add(`new ${shortText(callee)}()`);
    } else {
      this.#record.impureCall(frame, node, `new ${shortText(callee)}()`);
    }
    for (const argument of args) this.#walk(argument, frame);
  }

  #visitTaggedTemplate(node: ts.TaggedTemplateExpression, frame: Frame): void {
    const tag = skipWrappers(node.tag);
    const isStringRaw =
      ts.isPropertyAccessExpression(tag) &&
      ts.isIdentifier(tag.expression) &&
      tag.expression.text === 'String' &&
      tag.name.text === 'raw' &&
      this.#program.declarationOf(tag.expression) === undefined;
    const declaration = ts.isIdentifier(tag) ? this.#program.declarationOf(tag) : undefined;
    if (isStringRaw) {
      frame.summary.calls.add('String.raw``');
    } else if (ts.isIdentifier(tag) && declaration !== undefined && !isWithin(declaration, frame.scope)) {
      // A tag declared in this project is a helper like any other (called with the template's parts).
      const binding = importBindingOf(declaration);
      const use =
        binding !== null
          ? importUse(this.#program, tag, binding, binding.importedName, true)
          : outerDeclarationUse(tag, declaration, true);
      this.#use(frame, node, tag, use, null);
    } else {
      this.#record.impureCall(frame, node, `${shortText(tag)}\`\``);
    }
    this.#walk(node.template, frame);
  }

  #visitMemberRead(node: ts.PropertyAccessExpression | ts.ElementAccessExpression, frame: Frame): void {
    const receiver = skipWrappers(node.expression);
    const member = memberName(node);
    if (ts.isIdentifier(receiver)) {
      const declaration = this.#program.declarationOf(receiver);
      if (declaration === undefined) {
        const forbidden = nondeterministicMember(receiver.text, member);
        if (forbidden !== undefined) {
          this.#record.nondeterministic(frame, node, forbidden, shortText(node));
          return;
        }
      } else if (member !== null) {
        const binding = namespaceImportOf(declaration);
        if (binding !== null) {
          this.#use(frame, node, receiver, importUse(this.#program, receiver, binding, member, false), null);
          return;
        }
      }
    }
    const root = rootOf(this.#program, node, frame);
    if (root !== null) this.#record.read(frame, node, root);
    // `Date.prototype.getHours`, `clock.now` taken as a value (to be called later): not a field of the context.
    const taken = root === null && member !== null ? impureMethod(member, [], false) : undefined;
    if (taken !== undefined) this.#record.nondeterministic(frame, node, taken, shortText(node));
    this.#walk(node.expression, frame);
    if (ts.isElementAccessExpression(node)) this.#walk(node.argumentExpression, frame);
  }

  #visitReference(identifier: ts.Identifier, frame: Frame): void {
    const declaration = this.#program.declarationOf(identifier);
    if (declaration === undefined) {
      this.#use(frame, identifier, identifier, globalUse(identifier.text, false), null);
      return;
    }
    if (isWithin(declaration, frame.scope)) {
      const root = rootOfDeclaration(this.#program, declaration, frame, new Set());
      if (root !== null) this.#record.read(frame, identifier, root);
      return;
    }
    const binding = importBindingOf(declaration);
    const use =
      binding !== null
        ? importUse(this.#program, identifier, binding, binding.importedName, false)
        : outerDeclarationUse(identifier, declaration, false);
    this.#use(frame, identifier, identifier, use, null);
  }

  /**
   * Acts on the use of a name declared outside the function: at `site` (the call, or the read)
   * for calls and nondeterministic sources, at `identifier` (the name) for reads of state.
   */
  #use(frame: Frame, site: ts.Node, identifier: ts.Identifier, use: NameUse, call: ts.CallExpression | null): void {
    switch (use.kind) {
      case 'helper':
        this.#followHelper(frame, site, use.name, use.helper, call?.arguments ?? []);
        return;
      case 'const':
        this.#followConst(frame, identifier, use.name, use.declaration);
        return;
      case 'called-const':
        this.#callConst(frame, site, identifier, use);
        return;
      case 'pure-call':
        frame.summary.calls.add(use.call);
        return;
      case 'nondeterministic':
        this.#record.nondeterministic(frame, site, use.source, use.text);
        return;
      case 'impure-call':
        this.#record.impureCall(frame, site, use.callee, use.module);
        return;
      case 'mutable-read':
        this.#record.mutableRead(frame, identifier, use.reason, use.binding, use.module, use.declaration);
        return;
      case 'harmless':
        return;
    }
  }

  // ---- following helpers and constants --------------------------------------------------------

  #followHelper(frame: Frame, site: ts.Node, name: string, helper: FunctionLike, args: readonly ts.Expression[]): void {
    if (helper.body === undefined) {
      this.#record.impureCall(frame, site, `${name}()`);
      return;
    }
    const bindings = new Map<ts.ParameterDeclaration, Root>();
    helper.parameters.forEach((parameter, index) => {
      const argument = args[index];
      if (argument === undefined || parameter.dotDotDotToken !== undefined || ts.isSpreadElement(argument)) return;
      const root = rootOf(this.#program, argument, frame);
      if (root !== null) {
        bindings.set(parameter, root);
        frame.boundArguments.add(skipWrappers(argument));
      }
    });
    frame.summary.calls.add(`${name}()`);
    // Recursion adds nothing the visit already under way does not find.
    if (this.#active.has(helper)) {
      this.#cuts++;
      return;
    }
    const signature = JSON.stringify(helper.parameters.map((p) => bindings.get(p) ?? null));
    let byBindings = this.#helperMemo.get(helper);
    let summary = byBindings?.get(signature);
    if (summary === undefined) {
      const cuts = this.#cuts;
      this.#active.add(helper);
      try {
        summary = this.#analyzeScope(helper, bindings);
      } finally {
        this.#active.delete(helper);
      }
      if (cuts === this.#cuts) {
        if (byBindings === undefined) this.#helperMemo.set(helper, (byBindings = new Map()));
        byBindings.set(signature, summary);
      }
    }
    const declaredAt = this.#program.location(declarationNameNode(helper));
    this.#record.merge(frame, site, { kind: 'helper', name: `${name}()`, declaredAt }, summary);
  }

  #followConst(frame: Frame, identifier: ts.Identifier, name: string, declaration: ts.VariableDeclaration): void {
    const initializer = declaration.initializer;
    if (initializer === undefined) return;
    const mutable = mutableInitializer(initializer, isMutableLiteral);
    if (mutable !== null) {
      this.#record.mutableRead(frame, identifier, mutable, name, null, declaration);
      return;
    }
    if (this.#active.has(declaration)) {
      this.#cuts++;
      return;
    }
    let summary = this.#constMemo.get(declaration);
    if (summary === undefined) {
      const cuts = this.#cuts;
      this.#active.add(declaration);
      try {
        summary = this.#analyzeScope(initializer, new Map());
      } finally {
        this.#active.delete(declaration);
      }
      if (cuts === this.#cuts) this.#constMemo.set(declaration, summary);
    }
    this.#record.merge(
      frame,
      identifier,
      { kind: 'const', name, declaredAt: this.#program.location(declaration.name) },
      summary,
    );
  }

  /**
   * A call of a const that is not a function codegen follows: an alias (`const now = Date.now`,
   * `const { random } = Math`). Its initializer is followed like any const read; what it aliases
   * decides the call. Anything else is a function codegen cannot see.
   */
  #callConst(
    frame: Frame,
    site: ts.Node,
    identifier: ts.Identifier,
    use: Extract<NameUse, { kind: 'called-const' }>,
  ): void {
    const before = frame.summary.findings.length;
    this.#followConst(frame, identifier, use.name, use.declaration);
    if (frame.summary.findings.length > before) return;
    const initializer =
      use.declaration.initializer === undefined ? undefined : skipWrappers(use.declaration.initializer);
    const isGlobal = (node: ts.Expression): node is ts.Identifier =>
      ts.isIdentifier(node) && this.#program.declarationOf(node) === undefined;
    let global: string | null = null;
    let member = use.member;
    if (initializer !== undefined && isGlobal(initializer)) {
      global = initializer.text;
    } else if (
      initializer !== undefined &&
      member === null &&
      ts.isPropertyAccessExpression(initializer) &&
      isGlobal(initializer.expression)
    ) {
      global = initializer.expression.text;
      member = initializer.name.text;
    }
    if (global !== null && member !== null && ts.isCallExpression(site)) {
      this.#globalMemberCall(frame, site, global, member, `${global}.${member} through the alias ${use.name}()`);
    } else if (global !== null && member === null && PURE_GLOBAL_FUNCTIONS.has(global) && global !== 'Date') {
      frame.summary.calls.add(`${global}()`);
    } else if (initializer !== undefined && ts.isCallExpression(initializer)) {
      // `const next = makeCounter()`: a function a call made, which may keep state in its closure.
      this.#record.mutableRead(
        frame,
        identifier,
        'closure',
        `${use.name} = ${shortText(initializer)}`,
        use.module ?? null,
        use.declaration,
      );
    } else {
      this.#record.impureCall(frame, site, `${use.name}()`, use.module);
    }
  }
}
