import type { z } from 'zod';
import type { StepKind } from './step-kind.js';

/*
 * The type-level machinery of the builder: the phantom record of a workflow's input, steps and
 * handler specs, and how each step method extends it. Nothing here exists at run time. Reading a
 * workflow's types (`WorkflowInput`, `WorkflowOutput`, …) is in workflow.ts, beside `AnyWorkflow`.
 */

/**
 * The output later steps see: `T`, or `T | undefined` when the step has a condition. `TWhen`
 * is what the condition returns — inferred from it, `never` when there is none (inferring the
 * function itself would fix it before its parameters are typed).
 */
export type MaybeSkipped<T, TWhen> = [TWhen] extends [never] ? T : T | undefined;

/** Type-level record of one declared step; never exists at run time. */
export interface StepSpec<TKind extends StepKind, TOutput, TPrior, TIdempotent extends boolean> {
  readonly kind: TKind;
  readonly output: TOutput;
  /** Outputs of the steps declared before this one: all a handler or key of this step may see. */
  readonly prior: TPrior;
  readonly idempotentByKey: TIdempotent;
}

type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** Readable compile error for a step name declared twice. */
export interface DuplicateStepName<TName extends string> {
  readonly '~error': `step "${TName}" is already declared in this workflow; step names must be unique`;
}

export type NewStepName<TName extends string, TSteps> = TName &
  (TName extends keyof TSteps ? DuplicateStepName<TName> : unknown);

export type WithStep<TSteps, TName extends string, TOutput> = Simplify<TSteps & { readonly [P in TName]: TOutput }>;

export type WithSpec<TSpecs, TName extends string, TSpec> = TSpecs & { readonly [P in TName]: TSpec };

/** A step's compensation is a handler of the contract like a step's: a spec under its own name (none without one). */
export type WithCompensationSpec<TSpecs, TCompName extends string, TSpec> = [TCompName] extends [never]
  ? TSpecs
  : WithSpec<TSpecs, TCompName, TSpec>;

/** Phantom types carried by a workflow; read them with the `Workflow*` helper types. */
export interface WorkflowTypes<TInputSchema extends z.ZodType, TSteps, TSpecs, TLast = undefined> {
  readonly input: z.output<TInputSchema>;
  readonly startInput: z.input<TInputSchema>;
  readonly steps: TSteps;
  readonly specs: TSpecs;
  /** The last step's output (what a parent's `child` step receives). */
  readonly last: TLast;
}
