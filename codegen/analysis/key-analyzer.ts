import { ts } from 'ts-morph';
import type {
  KeyFinding,
  MutableReadReason,
  NondeterministicSource,
  StepRead,
  ViaHop,
} from '../model/workflow-model.js';
import type { AnalysisProgram } from './analysis-program.js';
import {
  importBindingOf,
  namespaceImportOf,
  resolveImportedDeclaration,
  type ExportedDeclaration,
  type ImportBinding,
} from './module-exports.js';
import {
  IO_GLOBAL_FUNCTIONS,
  isCryptoModule,
  NONDETERMINISTIC_CRYPTO_EXPORTS,
  NONDETERMINISTIC_GLOBALS,
  NONDETERMINISTIC_MODULES,
  nondeterministicMember,
  PURE_GLOBAL_FUNCTIONS,
  PURE_GLOBAL_VALUES,
  PURE_METHODS,
  PURE_MODULE_FUNCTIONS,
  PURE_NAMESPACE_MEMBERS,
} from './pure-functions.js';
import {
  bindingOwner,
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
} from './syntax.js';

/**
 * What a value in a key is derived from. The key's parameter is the context; property reads
 * on it narrow the root (`ctx.steps.load.id` is step `load`, path `id`). Anything computed
 * (a call result, a literal) has no root.
 */
type Root =
  | { readonly kind: 'ctx' }
  | { readonly kind: 'input'; readonly path: string }
  | { readonly kind: 'steps' }
  | { readonly kind: 'step'; readonly step: string; readonly path: string }
  | { readonly kind: 'steps-dynamic' };

/** Everything one function (the key, or a helper it calls) reads and does. */
export interface KeySummary {
  readonly inputFields: Set<string>;
  readsWholeInput: boolean;
  readsAllSteps: boolean;
  readonly stepReads: StepRead[];
  readonly calls: Set<string>;
  readonly findings: KeyFinding[];
}

function emptySummary(): KeySummary {
  return { inputFields: new Set(), readsWholeInput: false, readsAllSteps: false, stepReads: [], calls: new Set(), findings: [] };
}

/** A function (or module-const initializer) being analysed, with what its parameters are bound to. */
interface Frame {
  readonly scope: ts.Node;
  readonly bindings: ReadonlyMap<ts.ParameterDeclaration, Root>;
  readonly summary: KeySummary;
  /** Arguments handed to a followed helper: the helper records what it reads of them. */
  readonly boundArguments: Set<ts.Node>;
}

/**
 * Decides whether a key is a pure function of the workflow input and earlier steps' outputs.
 * It walks the key's body, follows helper functions and module constants (in the same file or
 * relative imports; transitively, guarding recursion), and records every read of input and
 * steps plus every finding (clock, randomness, environment, I/O, unknown calls, mutable state).
 *
 * Conservative by design: what it cannot prove pure is a finding, never silently accepted.
 */
export class KeyAnalyzer {
  readonly #program: AnalysisProgram;
  readonly #helperMemo = new Map<ts.Node, Map<string, KeySummary>>();
  readonly #constMemo = new Map<ts.Node, KeySummary>();
  readonly #active = new Set<ts.Node>();
  /**
   * Counts recursion cut-offs. A summary computed while a cut happened lacks what the cut-off
   * function contributes further up the cycle, so it must not be memoised for other callers.
   */
  #cuts = 0;

  constructor(program: AnalysisProgram) {
    this.#program = program;
  }

  /** Analyses a key function `({ input, steps }) => string`. */
  analyzeKey(key: FunctionLike): KeySummary {
    const bindings = new Map<ts.ParameterDeclaration, Root>();
    const context = key.parameters[0];
    if (context !== undefined) bindings.set(context, { kind: 'ctx' });
    this.#active.add(key);
    try {
      return this.#analyzeScope(key, bindings);
    } finally {
      this.#active.delete(key);
    }
  }

  #analyzeScope(scope: ts.Node, bindings: ReadonlyMap<ts.ParameterDeclaration, Root>): KeySummary {
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
      this.#nondeterministic(frame, node, 'await', 'await');
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
      this.#mutableRead(frame, node, 'this', 'this', null);
    } else if (ts.isMetaProperty(node)) {
      this.#nondeterministic(frame, node, 'env', node.getText());
      return;
    }
    ts.forEachChild(node, (child) => this.#walk(child, frame));
  }

  #visitCall(call: ts.CallExpression, frame: Frame): void {
    const callee = skipWrappers(call.expression);
    const walkArguments = (): void => {
      for (const argument of call.arguments) this.#walk(argument, frame);
    };
    if (callee.kind === ts.SyntaxKind.ImportKeyword) {
      this.#nondeterministic(frame, call, 'io', 'import()');
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
      // An immediately invoked function is part of the key's own body.
      ts.forEachChild(call, (child) => this.#walk(child, frame));
      return;
    }
    this.#impureCall(frame, call, `${shortText(callee)}()`);
    ts.forEachChild(call, (child) => this.#walk(child, frame));
  }

  #visitFunctionCall(call: ts.CallExpression, callee: ts.Identifier, frame: Frame): void {
    const name = callee.text;
    const declaration = this.#program.declarationOf(callee);
    if (declaration === undefined) {
      if (PURE_GLOBAL_FUNCTIONS.has(name)) frame.summary.calls.add(`${name}()`);
      else if (IO_GLOBAL_FUNCTIONS.has(name)) this.#nondeterministic(frame, call, 'io', `${name}()`);
      else if (NONDETERMINISTIC_GLOBALS.has(name)) this.#nondeterministic(frame, call, NONDETERMINISTIC_GLOBALS.get(name)!, `${name}()`);
      else this.#impureCall(frame, call, `${name}()`);
      return;
    }
    if (isWithin(declaration, frame.scope)) {
      // A function declared inside the key is walked as part of it; a parameter is an unknown function.
      if (ts.isParameter(declaration) || ts.isBindingElement(declaration)) this.#impureCall(frame, call, `${name}()`);
      return;
    }
    const binding = importBindingOf(declaration);
    if (binding !== null) {
      this.#visitImportUse(frame, call, callee, binding, binding.importedName, call);
      return;
    }
    this.#visitOuterDeclarationUse(frame, callee, declaration, call);
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
        const forbidden = nondeterministicMember(receiver.text, member);
        if (forbidden !== undefined) {
          this.#nondeterministic(frame, call, forbidden, `${receiver.text}.${member}()`);
          return;
        }
        const namespace = PURE_NAMESPACE_MEMBERS.get(receiver.text);
        if (namespace !== undefined) {
          if (namespace.has(member)) frame.summary.calls.add(`${receiver.text}.${member}()`);
          else this.#impureCall(frame, call, `${receiver.text}.${member}()`);
          return;
        }
      } else {
        const binding = namespaceImportOf(declaration);
        if (binding !== null) {
          this.#visitImportUse(frame, call, receiver, binding, member, call);
          return;
        }
      }
    }
    if (PURE_METHODS.has(member)) {
      frame.summary.calls.add(`.${member}()`);
    } else {
      this.#impureCall(frame, call, `${shortText(callee)}()`);
      // `Reflect.get()`, `lib.format()`: the unknown call is the finding; its receiver is part of it.
      if (ts.isIdentifier(receiver) && !this.#isLocalOrParameter(receiver, frame)) return;
    }
    this.#walk(callee.expression, frame);
    if (ts.isElementAccessExpression(callee)) this.#walk(callee.argumentExpression, frame);
  }

  #isLocalOrParameter(identifier: ts.Identifier, frame: Frame): boolean {
    const declaration = this.#program.declarationOf(identifier);
    return declaration !== undefined && isWithin(declaration, frame.scope);
  }

  #visitNew(node: ts.NewExpression, frame: Frame): void {
    const callee = skipWrappers(node.expression);
    const args = node.arguments ?? [];
    if (ts.isIdentifier(callee) && callee.text === 'Date' && this.#program.declarationOf(callee) === undefined) {
      if (args.length === 0) this.#nondeterministic(frame, node, 'clock', 'new Date()');
      else frame.summary.calls.add('new Date()');
    } else {
      this.#impureCall(frame, node, `new ${shortText(callee)}()`);
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
    if (isStringRaw) frame.summary.calls.add('String.raw``');
    else this.#impureCall(frame, node, `${shortText(tag)}\`\``);
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
          this.#nondeterministic(frame, node, forbidden, shortText(node));
          return;
        }
      } else if (member !== null) {
        const binding = namespaceImportOf(declaration);
        if (binding !== null) {
          this.#visitImportUse(frame, node, receiver, binding, member, null);
          return;
        }
      }
    }
    const root = this.#rootOf(node, frame);
    if (root !== null) this.#recordUse(node, root, frame);
    this.#walk(node.expression, frame);
    if (ts.isElementAccessExpression(node)) this.#walk(node.argumentExpression, frame);
  }

  #visitReference(identifier: ts.Identifier, frame: Frame): void {
    const declaration = this.#program.declarationOf(identifier);
    const name = identifier.text;
    if (declaration === undefined) {
      if (PURE_GLOBAL_VALUES.has(name) || PURE_GLOBAL_FUNCTIONS.has(name) || PURE_NAMESPACE_MEMBERS.has(name) || name === 'Date' || name === 'arguments') return;
      const source = NONDETERMINISTIC_GLOBALS.get(name) ?? (IO_GLOBAL_FUNCTIONS.has(name) ? 'io' : undefined);
      if (source !== undefined) this.#nondeterministic(frame, identifier, source, name);
      else this.#mutableRead(frame, identifier, 'global', name, null);
      return;
    }
    if (isWithin(declaration, frame.scope)) {
      const root = this.#rootOfDeclaration(declaration, frame, new Set());
      if (root !== null) this.#recordUse(identifier, root, frame);
      return;
    }
    const binding = importBindingOf(declaration);
    if (binding !== null) {
      this.#visitImportUse(frame, identifier, identifier, binding, binding.importedName, null);
      return;
    }
    this.#visitOuterDeclarationUse(frame, identifier, declaration, null);
  }

  /** A read or call of something declared outside the function being analysed. */
  #visitOuterDeclarationUse(
    frame: Frame,
    identifier: ts.Identifier,
    declaration: ts.Declaration,
    call: ts.CallExpression | null,
  ): void {
    const name = identifier.text;
    if (ts.isBindingElement(declaration)) {
      // `const { PREFIX } = config`: as constant as the declaration it destructures.
      const owner = bindingOwner(declaration);
      if (owner !== null && ts.isVariableDeclaration(owner)) {
        this.#visitOuterDeclarationUse(frame, identifier, owner, call);
      } else {
        this.#mutableRead(frame, identifier, 'outer-variable', name, null);
      }
      return;
    }
    if (ts.isParameter(declaration)) {
      this.#mutableRead(frame, identifier, 'outer-variable', name, null, declaration);
      return;
    }
    if (this.#visitDeclaredValue(frame, call ?? identifier, identifier, name, declaration, call, null)) return;
    if (call !== null) this.#impureCall(frame, call, `${name}()`);
    else this.#mutableRead(frame, identifier, 'outer-variable', name, null, declaration);
  }

  /**
   * A use of a function, variable or enum declared in this file (`specifier` null) or exported by
   * another module; false for any other declaration, which the caller reports.
   */
  #visitDeclaredValue(
    frame: Frame,
    site: ts.Node,
    identifier: ts.Identifier,
    shown: string,
    declaration: ts.Declaration,
    call: ts.CallExpression | null,
    specifier: string | null,
  ): boolean {
    if (ts.isFunctionDeclaration(declaration)) {
      this.#followHelper(frame, site, shown, declaration, call?.arguments ?? []);
      return true;
    }
    if (ts.isVariableDeclaration(declaration)) {
      this.#visitVariableUse(frame, site, identifier, shown, declaration, call, specifier);
      return true;
    }
    return ts.isEnumDeclaration(declaration) || ts.isEnumMember(declaration);
  }

  #visitVariableUse(
    frame: Frame,
    site: ts.Node,
    identifier: ts.Identifier,
    shown: string,
    declaration: ts.VariableDeclaration,
    call: ts.CallExpression | null,
    specifier: string | null,
  ): void {
    const keyword = variableKeyword(declaration);
    if (keyword !== 'const') {
      if (specifier !== null) {
        this.#mutableRead(frame, identifier, 'imported-let', shown, specifier, declaration);
      } else {
        const atModuleLevel = ts.isSourceFile(declaration.parent.parent.parent);
        this.#mutableRead(frame, identifier, atModuleLevel ? 'module-let' : 'outer-variable', `${keyword} ${shown}`, null, declaration);
      }
      return;
    }
    const helper = constFunction(declaration);
    if (helper !== null) {
      this.#followHelper(frame, site, shown, helper, call?.arguments ?? []);
      return;
    }
    if (call !== null) {
      this.#impureCall(frame, call, `${shown}()`, specifier ?? undefined);
      return;
    }
    this.#followConst(frame, identifier, shown, declaration);
  }

  /** A read (call === null) or call of an imported binding, or of `member` of an imported namespace. */
  #visitImportUse(
    frame: Frame,
    site: ts.Node,
    identifier: ts.Identifier,
    binding: ImportBinding,
    member: string,
    call: ts.CallExpression | null,
  ): void {
    const { specifier } = binding;
    const shown = member === binding.importedName ? identifier.text : `${identifier.text}.${member}`;
    if (isCryptoModule(specifier)) {
      const random = NONDETERMINISTIC_CRYPTO_EXPORTS.get(member);
      if (random !== undefined) {
        this.#nondeterministic(frame, site, random, call !== null ? `${shown}()` : shown);
        return;
      }
    }
    const moduleSource = NONDETERMINISTIC_MODULES.get(specifier);
    if (moduleSource !== undefined) {
      this.#nondeterministic(frame, site, moduleSource, call !== null ? `${shown}()` : shown);
      return;
    }
    if (PURE_MODULE_FUNCTIONS.get(specifier)?.has(member)) {
      frame.summary.calls.add(`${member}()`);
      return;
    }
    const target = resolveImportedDeclaration(
      this.#program,
      identifier.getSourceFile().fileName,
      specifier,
      member === '*' ? binding.importedName : member,
    );
    if (target === null) {
      if (call !== null) this.#impureCall(frame, call, `${shown}()`, specifier);
      else this.#mutableRead(frame, identifier, 'import', shown, specifier);
      return;
    }
    this.#visitImportedDeclaration(frame, site, identifier, shown, specifier, target, call);
  }

  #visitImportedDeclaration(
    frame: Frame,
    site: ts.Node,
    identifier: ts.Identifier,
    shown: string,
    specifier: string,
    target: ExportedDeclaration,
    call: ts.CallExpression | null,
  ): void {
    if (this.#visitDeclaredValue(frame, site, identifier, shown, target, call, specifier)) return;
    if (call !== null) this.#impureCall(frame, call, `${shown}()`, specifier);
    else this.#mutableRead(frame, identifier, 'import', shown, specifier);
  }

  // ---- following helpers and constants --------------------------------------------------------

  #followHelper(
    frame: Frame,
    site: ts.Node,
    name: string,
    helper: FunctionLike,
    args: readonly ts.Expression[],
  ): void {
    if (helper.body === undefined) {
      this.#impureCall(frame, site, `${name}()`);
      return;
    }
    const bindings = new Map<ts.ParameterDeclaration, Root>();
    helper.parameters.forEach((parameter, index) => {
      const argument = args[index];
      if (argument === undefined || parameter.dotDotDotToken !== undefined || ts.isSpreadElement(argument)) return;
      const root = this.#rootOf(argument, frame);
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
    this.#merge(frame, site, { kind: 'helper', name: `${name}()`, declaredAt: this.#program.location(declarationNameNode(helper)) }, summary);
  }

  #followConst(frame: Frame, identifier: ts.Identifier, name: string, declaration: ts.VariableDeclaration): void {
    const initializer = declaration.initializer;
    if (initializer === undefined) return;
    if (isMutableLiteral(initializer)) {
      this.#mutableRead(frame, identifier, 'mutable-object', name, null, declaration);
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
    this.#merge(frame, identifier, { kind: 'const', name, declaredAt: this.#program.location(declaration.name) }, summary);
  }

  /** Adds what a helper or constant does to the caller, located at the call/read site. */
  #merge(frame: Frame, site: ts.Node, hop: ViaHop, inner: KeySummary): void {
    const at = this.#program.location(site);
    const summary = frame.summary;
    for (const field of inner.inputFields) summary.inputFields.add(field);
    summary.readsWholeInput ||= inner.readsWholeInput;
    summary.readsAllSteps ||= inner.readsAllSteps;
    for (const read of inner.stepReads) summary.stepReads.push({ ...read, at, via: [hop, ...read.via] });
    for (const call of inner.calls) summary.calls.add(call);
    for (const finding of inner.findings) summary.findings.push({ ...finding, at, via: [hop, ...finding.via] });
  }

  // ---- roots ----------------------------------------------------------------------------------

  #rootOf(expression: ts.Expression, frame: Frame): Root | null {
    const node = skipWrappers(expression);
    if (ts.isIdentifier(node)) {
      const declaration = this.#program.declarationOf(node);
      if (declaration === undefined || !isWithin(declaration, frame.scope)) return null;
      return this.#rootOfDeclaration(declaration, frame, new Set());
    }
    if (ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node)) {
      const parent = this.#rootOf(node.expression, frame);
      return parent === null ? null : childRoot(parent, memberName(node));
    }
    return null;
  }

  #rootOfDeclaration(declaration: ts.Declaration, frame: Frame, seen: Set<ts.Node>): Root | null {
    if (seen.has(declaration)) return null;
    seen.add(declaration);
    if (ts.isParameter(declaration)) return frame.bindings.get(declaration) ?? null;
    if (ts.isBindingElement(declaration)) {
      const pattern = declaration.parent;
      const owner = pattern.parent;
      let parent: Root | null = null;
      if (ts.isParameter(owner)) parent = frame.bindings.get(owner) ?? null;
      else if (ts.isVariableDeclaration(owner)) parent = owner.initializer === undefined ? null : this.#rootOf(owner.initializer, frame);
      else if (ts.isBindingElement(owner)) parent = this.#rootOfDeclaration(owner, frame, seen);
      if (parent === null) return null;
      if (declaration.dotDotDotToken !== undefined) return parent;
      if (ts.isArrayBindingPattern(pattern)) return childRoot(parent, `[${pattern.elements.indexOf(declaration)}]`);
      const property = declaration.propertyName ?? declaration.name;
      return childRoot(parent, ts.isIdentifier(property) || ts.isStringLiteral(property) ? property.text : null);
    }
    if (ts.isVariableDeclaration(declaration) && declaration.initializer !== undefined && ts.isIdentifier(declaration.name)) {
      return this.#rootOf(declaration.initializer, frame);
    }
    return null;
  }

  /** Records a read of input/steps at the outermost expression that still names it. */
  #recordUse(node: ts.Expression, root: Root, frame: Frame): void {
    const { outer, parent } = outermostWrapper(node);
    const isReceiverOfMethodCall =
      (ts.isPropertyAccessExpression(parent) || ts.isElementAccessExpression(parent)) &&
      parent.expression === outer &&
      ts.isCallExpression(parent.parent) &&
      parent.parent.expression === parent;
    const isObjectOfMemberRead =
      (ts.isPropertyAccessExpression(parent) || ts.isElementAccessExpression(parent)) && parent.expression === outer;
    if (isObjectOfMemberRead && !isReceiverOfMethodCall) return;
    // `const { load } = steps` or `const id = input.id`: the variable's uses record the read.
    if (ts.isVariableDeclaration(parent) && parent.initializer === outer) return;
    if (frame.boundArguments.has(skipWrappers(node)) || frame.boundArguments.has(outer)) return;
    const summary = frame.summary;
    switch (root.kind) {
      case 'ctx':
        summary.readsWholeInput = true;
        summary.readsAllSteps = true;
        return;
      case 'input':
        if (root.path === '') summary.readsWholeInput = true;
        else summary.inputFields.add(root.path);
        return;
      case 'steps':
        summary.readsAllSteps = true;
        return;
      case 'step':
        summary.stepReads.push({ step: root.step, path: root.path, at: this.#program.location(node), via: [] });
        return;
      case 'steps-dynamic':
        this.#finding(frame, { kind: 'dynamic-step-access' }, node, shortText(node));
        return;
    }
  }

  // ---- findings -------------------------------------------------------------------------------

  #nondeterministic(frame: Frame, node: ts.Node, source: NondeterministicSource, text: string): void {
    this.#finding(frame, { kind: 'nondeterministic', source }, node, text);
  }

  #impureCall(frame: Frame, node: ts.Node, callee: string, module?: string): void {
    const shown = module === undefined ? callee : `${callee} (imported from '${module}')`;
    this.#finding(frame, { kind: 'impure-call', callee: shown }, node, callee);
  }

  #mutableRead(
    frame: Frame,
    node: ts.Node,
    reason: MutableReadReason,
    binding: string,
    module: string | null,
    declaration?: ts.Node,
  ): void {
    const origin = declaration === undefined ? node : declarationNameNode(declaration);
    const location = this.#program.location(node);
    frame.summary.findings.push({
      kind: 'mutable-read',
      reason,
      binding,
      module,
      at: location,
      origin: this.#program.location(origin),
      text: shortText(node),
      via: [],
    });
  }

  #finding(
    frame: Frame,
    detail:
      | { kind: 'nondeterministic'; source: NondeterministicSource }
      | { kind: 'impure-call'; callee: string }
      | { kind: 'dynamic-step-access' },
    node: ts.Node,
    text: string,
  ): void {
    const location = this.#program.location(node);
    frame.summary.findings.push({ ...detail, at: location, origin: location, text, via: [] });
  }
}

// ---- context roots ---------------------------------------------------------------------------

function childRoot(parent: Root, member: string | null): Root | null {
  switch (parent.kind) {
    case 'ctx':
      if (member === 'input') return { kind: 'input', path: '' };
      if (member === 'steps') return { kind: 'steps' };
      return null;
    case 'input':
      if (member === null) return parent;
      return { kind: 'input', path: joinPath(parent.path, member) };
    case 'steps':
      return member === null ? { kind: 'steps-dynamic' } : { kind: 'step', step: member, path: '' };
    case 'step':
      if (member === null) return parent;
      return { kind: 'step', step: parent.step, path: joinPath(parent.path, member) };
    case 'steps-dynamic':
      return parent;
  }
}

function joinPath(path: string, member: string): string {
  if (member.startsWith('[')) return `${path}${member}`;
  return path === '' ? member : `${path}.${member}`;
}

/** An object or array literal not frozen with `as const` can be mutated by any module that sees it. */
function isMutableLiteral(initializer: ts.Expression): boolean {
  let node = initializer;
  while (ts.isParenthesizedExpression(node) || ts.isSatisfiesExpression(node) || ts.isAsExpression(node)) {
    if (ts.isAsExpression(node) && ts.isTypeReferenceNode(node.type) && node.type.typeName.getText() === 'const') return false;
    node = node.expression;
  }
  return ts.isObjectLiteralExpression(node) || ts.isArrayLiteralExpression(node);
}
