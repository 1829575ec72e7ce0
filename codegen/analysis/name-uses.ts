// What using a name declared outside the analysed function amounts to for purity: a helper or
// constant to follow, a known-pure call, a nondeterministic source, an impure call, a read of
// state that can change, or nothing to worry about. Globals, same-file declarations and imports
// are told apart here; the analyser acts on the answer.

import { ts } from 'ts-morph';
import type { MutableReadReason, NondeterministicSource } from '../model/purity.js';
import type { AnalysisProgram } from './analysis-program.js';
import { resolveImportedDeclaration, type ImportBinding } from './module-exports.js';
import {
  IO_GLOBAL_FUNCTIONS,
  isCryptoModule,
  NONDETERMINISTIC_CRYPTO_EXPORTS,
  NONDETERMINISTIC_GLOBALS,
  NONDETERMINISTIC_MODULES,
  PURE_GLOBAL_FUNCTIONS,
  PURE_GLOBAL_VALUES,
  PURE_MODULE_FUNCTIONS,
  PURE_NAMESPACES,
} from './pure-functions.js';
import { bindingOwner, constFunction, variableKeyword, type FunctionLike } from './syntax.js';

/** What reading a name, or calling it, amounts to. `name`/`text`/`callee` are as messages show them. */
export type NameUse =
  | { readonly kind: 'helper'; readonly name: string; readonly helper: FunctionLike }
  | { readonly kind: 'const'; readonly name: string; readonly declaration: ts.VariableDeclaration }
  /**
   * A const that is called but is not a function codegen can follow (`const now = Date.now`,
   * `const { random } = Math`): what its initializer reads, plus what the aliased global member
   * (`member` of the destructured global, when destructured) is.
   */
  | {
      readonly kind: 'called-const';
      readonly name: string;
      readonly declaration: ts.VariableDeclaration;
      readonly member: string | null;
      readonly module?: string | undefined;
    }
  | { readonly kind: 'pure-call'; readonly call: string }
  | { readonly kind: 'nondeterministic'; readonly source: NondeterministicSource; readonly text: string }
  | { readonly kind: 'impure-call'; readonly callee: string; readonly module?: string | undefined }
  | {
      readonly kind: 'mutable-read';
      readonly reason: MutableReadReason;
      readonly binding: string;
      readonly module: string | null;
      /** Where the binding is declared, when the finding should point there. */
      readonly declaration?: ts.Node;
    }
  | { readonly kind: 'harmless' };

const HARMLESS: NameUse = { kind: 'harmless' };

/** A global (a name with no declaration in the analysed sources), read or called. */
export function globalUse(name: string, called: boolean): NameUse {
  if (called) {
    // `Date()` without new is the current time as a string.
    if (name === 'Date') return { kind: 'nondeterministic', source: 'clock', text: 'Date()' };
    if (PURE_GLOBAL_FUNCTIONS.has(name)) return { kind: 'pure-call', call: `${name}()` };
    if (IO_GLOBAL_FUNCTIONS.has(name)) return { kind: 'nondeterministic', source: 'io', text: `${name}()` };
    const source = NONDETERMINISTIC_GLOBALS.get(name);
    if (source !== undefined) return { kind: 'nondeterministic', source, text: `${name}()` };
    return { kind: 'impure-call', callee: `${name}()` };
  }
  if (PURE_GLOBAL_VALUES.has(name) || PURE_GLOBAL_FUNCTIONS.has(name) || PURE_NAMESPACES.has(name)) {
    return HARMLESS;
  }
  const source = NONDETERMINISTIC_GLOBALS.get(name) ?? (IO_GLOBAL_FUNCTIONS.has(name) ? 'io' : undefined);
  if (source !== undefined) return { kind: 'nondeterministic', source, text: name };
  return { kind: 'mutable-read', reason: 'global', binding: name, module: null };
}

/** A name declared in the analysed sources outside the function (not an import), read or called. */
export function outerDeclarationUse(identifier: ts.Identifier, declaration: ts.Declaration, called: boolean): NameUse {
  const name = identifier.text;
  if (ts.isBindingElement(declaration)) {
    // `const { PREFIX } = config`: as constant as the declaration it destructures.
    const owner = bindingOwner(declaration);
    if (owner === null || !ts.isVariableDeclaration(owner))
      return { kind: 'mutable-read', reason: 'outer-variable', binding: name, module: null };
    const use = outerDeclarationUse(identifier, owner, called);
    return use.kind === 'called-const' ? { ...use, member: destructuredMember(declaration) } : use;
  }
  if (ts.isParameter(declaration)) {
    return { kind: 'mutable-read', reason: 'outer-variable', binding: name, module: null, declaration };
  }
  const use = declaredValueUse(name, declaration, called, null);
  if (use !== null) return use;
  if (ts.isClassDeclaration(declaration) && !called)
    return { kind: 'mutable-read', reason: 'class', binding: name, module: null, declaration };
  return called
    ? { kind: 'impure-call', callee: `${name}()` }
    : { kind: 'mutable-read', reason: 'outer-variable', binding: name, module: null, declaration };
}

/**
 * An imported binding, or `member` of an imported namespace (`member` is the binding's imported
 * name for a use of the binding itself), read or called. `identifier` is the local name.
 */
export function importUse(
  program: AnalysisProgram,
  identifier: ts.Identifier,
  binding: ImportBinding,
  member: string,
  called: boolean,
): NameUse {
  const { specifier } = binding;
  const shown = member === binding.importedName ? identifier.text : `${identifier.text}.${member}`;
  const text = called ? `${shown}()` : shown;
  if (isCryptoModule(specifier)) {
    const random = NONDETERMINISTIC_CRYPTO_EXPORTS.get(member);
    if (random !== undefined) return { kind: 'nondeterministic', source: random, text };
  }
  const moduleSource = NONDETERMINISTIC_MODULES.get(specifier);
  if (moduleSource !== undefined) return { kind: 'nondeterministic', source: moduleSource, text };
  if (PURE_MODULE_FUNCTIONS.get(specifier)?.has(member)) return { kind: 'pure-call', call: `${member}()` };
  const target = resolveImportedDeclaration(
    program,
    identifier.getSourceFile().fileName,
    specifier,
    member === '*' ? binding.importedName : member,
  );
  const use = target === null ? null : declaredValueUse(shown, target, called, specifier);
  if (use !== null) return use;
  return called
    ? { kind: 'impure-call', callee: `${shown}()`, module: specifier }
    : { kind: 'mutable-read', reason: 'import', binding: shown, module: specifier };
}

/**
 * A function, variable or enum declared in this file (`specifier` null) or exported by module
 * `specifier`; null for any other declaration.
 */
function declaredValueUse(
  shown: string,
  declaration: ts.Declaration,
  called: boolean,
  specifier: string | null,
): NameUse | null {
  if (ts.isFunctionDeclaration(declaration)) return { kind: 'helper', name: shown, helper: declaration };
  if (ts.isVariableDeclaration(declaration)) return variableUse(shown, declaration, called, specifier);
  if (ts.isEnumDeclaration(declaration) || ts.isEnumMember(declaration)) return HARMLESS;
  return null;
}

function variableUse(
  shown: string,
  declaration: ts.VariableDeclaration,
  called: boolean,
  specifier: string | null,
): NameUse {
  const keyword = variableKeyword(declaration);
  if (keyword !== 'const') {
    if (specifier !== null)
      return { kind: 'mutable-read', reason: 'imported-let', binding: shown, module: specifier, declaration };
    const atModuleLevel = ts.isSourceFile(declaration.parent.parent.parent);
    return {
      kind: 'mutable-read',
      reason: atModuleLevel ? 'module-let' : 'closure',
      binding: `${keyword} ${shown}`,
      module: null,
      declaration,
    };
  }
  const helper = constFunction(declaration);
  if (helper !== null) return { kind: 'helper', name: shown, helper };
  if (called) return { kind: 'called-const', name: shown, declaration, member: null, module: specifier ?? undefined };
  return { kind: 'const', name: shown, declaration };
}

/** The property a destructured binding takes (`now` of `const { now } = Date`); null when computed or nested. */
export function destructuredMember(element: ts.BindingElement): string | null {
  if (!ts.isObjectBindingPattern(element.parent) || !ts.isVariableDeclaration(element.parent.parent)) return null;
  const property = element.propertyName ?? element.name;
  return ts.isIdentifier(property) || ts.isStringLiteral(property) ? property.text : null;
}
