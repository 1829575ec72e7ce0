// What the value analysis (codegen/analysis/key-values.ts) finds out about the values a key
// builds: the shapes of its context as its schemas declare them, the values it turns into text
// that are not primitives (LF016), and the outputs of conditional steps it reads without
// handling their absence (LF017). Plain data, like the rest of the model.

import type { SourceLocation } from './source-location.js';

/**
 * A value's shape as far as codegen reads it from a zod schema or an expression: enough to tell
 * whether `String(value)` is its content (a primitive, a list of primitives) or `[object …]`.
 * `unknown` is what codegen cannot tell: never reported.
 */
export type ValueShape =
  | { readonly kind: 'primitive' }
  | { readonly kind: 'object'; readonly fields: Readonly<Record<string, ValueShape>> | null }
  | { readonly kind: 'array'; readonly element: ValueShape }
  | { readonly kind: 'date' }
  | { readonly kind: 'promise' }
  | { readonly kind: 'union'; readonly members: readonly ValueShape[] }
  | { readonly kind: 'unknown' };

/** What a value turned into text becomes instead of its content. */
export type UnstableText = 'object' | 'array-of-objects' | 'date' | 'promise';

/** A value that is not a primitive turned into text (a template, `+`, `String()`, `.join()`, `.toString()`). */
export interface StringConversion {
  readonly at: SourceLocation;
  /** Source text of the value converted. */
  readonly text: string;
  /** How it is converted: `a template literal`, `+`, `String()`, `.join()`, `.toString()`. */
  readonly via: string;
  readonly becomes: UnstableText;
}

/** A read of a step's output that is `undefined` for every run the step's condition skipped. */
export interface ConditionalStepRead {
  readonly at: SourceLocation;
  readonly step: string;
  readonly text: string;
}

/** The value findings of one function the runtime evaluates for a step. */
export interface KeyValueFindings {
  readonly conversions: readonly StringConversion[];
  /** Reads of a conditional step's output not guarded by `??`, `||`, a test of it, or the same condition. */
  readonly conditionalReads: readonly ConditionalStepRead[];
}
