// The plain-data model between analysis and everything after it. No compiler objects: the
// validator and the emitters run on these records alone (and tests build them by hand).

import type { StepKind } from '../../dsl/step-kind.js';
import type { HandlerAnalysis } from './handler-model.js';
import type { PinnedPart } from './pinned-parts.js';
import type { PurityFinding, StepRead } from './purity.js';
import type { SourceLocation } from './source-location.js';

export type { MutableReadReason, NondeterministicSource, StepRead, ViaHop } from './purity.js';

/** One workflow version as declared: `export const x = workflow(name, { version, ... }).step(...)...`. */
export interface WorkflowModel {
  readonly name: string;
  readonly version: number;
  /** Name under which the source module exports the workflow const. */
  readonly exportName: string;
  /** Source file, relative to the codegen root, forward slashes. */
  readonly file: string;
  /** The `workflow(...)` call. */
  readonly location: SourceLocation;
  /** The `version` property, where LF007 points. */
  readonly versionLocation: SourceLocation;
  readonly steps: readonly StepModel[];
  /**
   * What runs in flight depend on besides the shape (codegen/model/pinned-parts.ts): the input
   * schema, each step's output schema and the functions the runtime evaluates for it, each with
   * the hash of its normalized source; the input first, then per step in step order.
   */
  readonly parts: readonly PinnedPart[];
}

export interface StepModel {
  readonly name: string;
  readonly kind: StepKind;
  readonly position: number;
  readonly idempotentByKey: boolean;
  /** The `.step` / `.transactional` / `.external` method name of this step's call. */
  readonly location: SourceLocation;
  /** `null` when the step declares no key (correct for `step`, LF001 for the effect kinds). */
  readonly key: KeyModel | null;
  readonly hasRequest: boolean;
  readonly hasRetry: boolean;
  /** Source text of `performTimeoutMs`, when declared. */
  readonly performTimeoutText: string | null;
}

/** What analysis found out about one key function. */
export interface KeyModel {
  /** Source text of the key (the function, or the name of the function it refers to). */
  readonly text: string;
  readonly location: SourceLocation;
  /** Input fields the key reads, as dotted paths (`customer.id`), sorted. */
  readonly inputFields: readonly string[];
  /** The key reads the whole input (or the whole key context) rather than named fields. */
  readonly readsWholeInput: boolean;
  /** The key reads the whole `steps` object rather than named steps. */
  readonly readsAllSteps: boolean;
  /** Every `steps.<name>` read, in source order. */
  readonly stepReads: readonly StepRead[];
  /** Functions the key calls (allow-listed ones and same-project helpers it followed), sorted. */
  readonly calls: readonly string[];
  /** The key reads the input or steps at all; a key that does not is the same for every run (LF005). */
  readonly dependsOnContext: boolean;
  /** Everything that makes the key impure or unanalysable; validation turns these into diagnostics. */
  readonly findings: readonly KeyFinding[];
}

/** What the purity analysis finds in a key; the key rules (LF002–LF005) turn these into diagnostics. */
export type KeyFinding = PurityFinding;

/** A declaration codegen cannot read statically (LF008); analysis reports it instead of guessing. */
export interface MalformedDeclaration {
  readonly location: SourceLocation;
  readonly message: string;
  /**
   * The workflow version the declaration is of, as far as codegen could read it (version null:
   * not read); undefined when not even its name could be read.
   */
  readonly workflow?: { readonly name: string; readonly version: number | null };
}

/** Output of the analysis stage. */
export interface AnalysisResult {
  /** Every file that was analysed, relative to the root, sorted. */
  readonly files: readonly string[];
  readonly workflows: readonly WorkflowModel[];
  readonly malformed: readonly MalformedDeclaration[];
  /**
   * The handler modules bound through generated contracts and what their handlers do (the
   * handler rules LF010–LF012 read it); absent when the analysis was not given handler modules
   * to look at.
   */
  readonly handlers?: HandlerAnalysis;
}
