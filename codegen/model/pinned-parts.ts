// What a run in flight depends on, as the manifest pins it per workflow version. Two kinds of pin:
//
// - the shape — step names, kinds, order and `idempotentByKey` — pinned by `definitionHash`
//   (dsl/workflow-shape.ts, which the runtime stores too) and the manifest's step list;
// - the parts below, each pinned by the hash of its source text (comments and formatting aside,
//   together with every declaration it uses; codegen/analysis/pinned-source.ts).
//
// LF007 fails on any change to either: no change counts as compatible, because codegen compares
// source, not meaning (it cannot prove two zod schemas or two functions equivalent). What is not
// pinned on purpose: `retry`, `timeoutMs` and `performTimeoutMs`, which are read per attempt (an
// intent stores its own horizon), and the handlers, which are not part of the declaration.

import type { SourceLocation } from './source-location.js';

/**
 * Functions the runtime evaluates for a step, by their property name in the step's config. A new
 * construct the runtime evaluates (say a `when` condition) is added here, with its description
 * below: analysis then reads it, the manifest pins it and LF007 names it.
 */
export const STEP_FUNCTION_PARTS = ['key', 'request'] as const;
export type StepFunctionPart = (typeof STEP_FUNCTION_PARTS)[number];

/** Every kind of pinned part, in the order messages list them (per step: output, then functions). */
export const PART_KINDS = ['input', 'output', ...STEP_FUNCTION_PARTS] as const;
export type PartKind = (typeof PART_KINDS)[number];

/** How messages name a part of each kind (`the key` + ` of step "charge"`). */
const PART_NAMES: Readonly<Record<PartKind, string>> = {
  input: 'the input schema',
  output: 'the output schema',
  key: 'the key',
  request: 'the request',
};

/** How notes name all parts of a kind at once. */
const PART_KIND_PLURALS: Readonly<Record<PartKind, string>> = {
  input: 'the input schema',
  output: 'output schemas',
  key: 'keys',
  request: 'requests',
};

/** One pinned part of a workflow version, as analysis found it. */
export interface PinnedPart {
  readonly kind: PartKind;
  /** The step the part belongs to; null for the workflow's input schema. */
  readonly step: string | null;
  /** sha256 of the normalized source with the declarations it uses, first 16 hex digits. */
  readonly hash: string;
  /** The property that declares it. */
  readonly location: SourceLocation;
}

/** The part's key in the manifest: `input`, `steps.<step>.<kind>` (`steps.charge.key`). */
export function partId(part: Pick<PinnedPart, 'kind' | 'step'>): string {
  return part.step === null ? part.kind : `steps.${part.step}.${part.kind}`;
}

/** Inverse of partId for the kinds this release knows; null for anything else. */
export function parsePartId(id: string): Pick<PinnedPart, 'kind' | 'step'> | null {
  if (id === 'input') return { kind: 'input', step: null };
  const match = /^steps\.([^.]+)\.([^.]+)$/.exec(id);
  const kind = match?.[2];
  if (match === null || kind === undefined || kind === 'input' || !(PART_KINDS as readonly string[]).includes(kind)) return null;
  return { kind: kind as PartKind, step: match[1]! };
}

/** `the input schema`, `the output schema of step "charge"`, `the key of step "charge"`. */
export function describePart(part: Pick<PinnedPart, 'kind' | 'step'>): string {
  return part.step === null ? PART_NAMES[part.kind] : `${PART_NAMES[part.kind]} of step "${part.step}"`;
}

/** `the input schema, output schemas and keys`. */
export function describePartKinds(kinds: readonly PartKind[]): string {
  const names = PART_KINDS.filter((k) => kinds.includes(k)).map((k) => PART_KIND_PLURALS[k]);
  return names.length <= 1 ? (names[0] ?? '') : `${names.slice(0, -1).join(', ')} and ${names.at(-1)!}`;
}
