// The purity analysis as plain data: what a caller says the analysed function's context offers,
// and what the analysis found. Rules map these findings to their own diagnostic codes (the key
// rules LF002–LF005 do); nothing here refers to the compiler.

import type { SourceLocation } from './source-location.js';

/**
 * What the context parameter (the first parameter) of an analysed function offers. A key's
 * `({ input, steps })` is `{ data: ['input'], steps: { visible: [<steps declared before it>] } }`;
 * a function of the input alone is `{ data: ['input'], steps: null }`.
 */
export interface ContextDescription {
  /** Properties holding data that is the same on every evaluation (`input`), read by path. */
  readonly data: readonly string[];
  /**
   * The context's `steps`: step outputs by name, of which only `visible` exist when the function
   * runs; reading another is an `invisible-step-read` finding. Null when it has no `steps`.
   */
  readonly steps: { readonly visible: readonly string[] } | null;
}

/** Whether a function is pure over its context, and what of the context it reads. */
export interface PurityReport {
  /** It reads (part of) its context. When false, it gives the same result for every context. */
  readonly dependsOnContext: boolean;
  /** Per data property of the context description, what the function reads of it. */
  readonly data: Readonly<Record<string, DataRead>>;
  /** It reads `steps` as a whole (or the whole context), rather than named steps. */
  readonly readsAllSteps: boolean;
  /** Every `steps.<name>` read, visible or not, in source order. */
  readonly stepReads: readonly StepRead[];
  /** Functions it calls that are known pure: of the standard library, and the helpers it followed; sorted. */
  readonly calls: readonly string[];
  /**
   * Everything that keeps it from being pure over its context, in the order found. A problem
   * reached the same way twice is listed once; each invisible step read is listed (as each
   * read is in `stepReads`).
   */
  readonly findings: readonly PurityFinding[];
}

export interface DataRead {
  /** The property is read as a whole (or the whole context is). */
  readonly whole: boolean;
  /** Paths read below it, dotted (`customer.id`, `lines[0].sku`), sorted. */
  readonly paths: readonly string[];
}

export interface StepRead {
  readonly step: string;
  /** Field path below the step's output (`amountCents`), or '' for the whole output. */
  readonly path: string;
  /** Where the function reads it (the call of a helper that reads it, if it comes through one). */
  readonly at: SourceLocation;
  readonly via: readonly ViaHop[];
}

/** One hop from the function to where a problem really is: a helper call or a module const read. */
export interface ViaHop {
  readonly kind: 'helper' | 'const';
  readonly name: string;
  /** Where the helper or const is declared. */
  readonly declaredAt: SourceLocation;
}

/**
 * The clock, randomness, a random UUID, the process environment, `await`, I/O, the process's
 * locale or time zone (local-time Date methods, toLocaleString and Intl without an explicit
 * locale and time zone), and garbage collection (WeakRef, FinalizationRegistry, WeakMap, WeakSet);
 * `async`: the function itself is async, so it returns a Promise (the worker refuses one, and
 * awaiting it would let it read what changes between retries).
 */
export type NondeterministicSource = 'clock' | 'random' | 'uuid' | 'env' | 'await' | 'async' | 'io' | 'locale' | 'gc';

/** Why a read is of state that can change between evaluations (or that codegen cannot see). */
export type MutableReadReason =
  | 'module-let'
  | 'imported-let'
  | 'import'
  | 'global'
  | 'this'
  | 'mutable-object'
  /**
   * Closure state: a `let` of an enclosing function, or a function made by a call
   * (`const next = makeCounter()`) that may keep state in its closure.
   */
  | 'closure'
  /** A class's static members, which any code can assign. */
  | 'class'
  /** A module-level instance (`new Map()`, a class's) or a regular expression with the g or y flag. */
  | 'mutable-instance'
  | 'outer-variable';

interface FindingBase {
  /** Where in the function the problem enters (the helper call or const read for indirect ones). */
  readonly at: SourceLocation;
  /** Where the offending expression itself is. Equals `at` for direct ones. */
  readonly origin: SourceLocation;
  /** Source text of the offending expression. */
  readonly text: string;
  readonly via: readonly ViaHop[];
}

export type PurityFinding =
  /** Reads the clock, randomness, the environment, awaits or does I/O. */
  | (FindingBase & { readonly kind: 'nondeterministic'; readonly source: NondeterministicSource })
  /** Calls something not known to be pure. */
  | (FindingBase & { readonly kind: 'impure-call'; readonly callee: string })
  /** Reads mutable module state, a global, `this`, or a binding codegen cannot prove constant. */
  | (FindingBase & {
      readonly kind: 'mutable-read';
      readonly reason: MutableReadReason;
      readonly binding: string;
      /** Module the binding is imported from, for imports. */
      readonly module: string | null;
    })
  /** Reads `steps[expression]`: which step cannot be known. */
  | (FindingBase & { readonly kind: 'dynamic-step-access' })
  /** Reads a step that the context description does not list as visible. */
  | (FindingBase & { readonly kind: 'invisible-step-read'; readonly step: string; readonly path: string });
