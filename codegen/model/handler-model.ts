// What the handler analysis found out about the handler modules bound through generated
// contracts, as plain data. The handler rules (LF010–LF012) read these records alone.

import type { HandlerStepKind } from '../../dsl/step-kind.js';
import type { ViaHop } from './purity.js';
import type { SourceLocation } from './source-location.js';

/** The handler modules that were looked at, and every binder call found in them. */
export interface HandlerAnalysis {
  /** Modules that passed discovery's text prefilter and were parsed, relative to the root, sorted. */
  readonly modules: readonly string[];
  /** Every call of a generated binder (`orderPaymentHandlers(...)`), in source order per module. */
  readonly bindings: readonly HandlerBindingModel[];
}

/** One call of a workflow version's generated binder, `<camelName>Handlers<DB>({ ... })`. */
export interface HandlerBindingModel {
  readonly workflow: string;
  readonly version: number;
  /** The binder call. */
  readonly location: SourceLocation;
  /** The handlers codegen could resolve, in the order of the object's properties. */
  readonly handlers: readonly HandlerModel[];
}

/** One step's handler: for `step` and `transactional` the function, for `external` its `perform`. Built-in kinds have none. */
export interface HandlerModel {
  readonly step: string;
  readonly kind: HandlerStepKind;
  /** The property that binds the handler (for `external`, the `perform` property when it is written out). */
  readonly location: SourceLocation;
  readonly effects: HandlerEffects;
}

/** Where an effect is, as the key analysis locates its findings. */
export interface EffectSite {
  /** Where it enters the handler: the effect itself, or the call of the helper that has it. */
  readonly at: SourceLocation;
  /** Where the expression itself is. Equals `at` for direct ones. */
  readonly origin: SourceLocation;
  /** Source text, e.g. `db.insertInto('shop.refund')`. */
  readonly text: string;
  readonly via: readonly ViaHop[];
}

/**
 * What the statement or handle a database write goes through is: `ctx.tx` (or a value derived
 * from it); something the handler got from outside its context (a closure's `db`, a module's
 * pool, a connection made from one) — provably not `ctx.tx`; or something the analysis cannot
 * tell (a callback's parameter, the result of a call that was given the context).
 */
export type WriteChannel = 'tx' | 'outside' | 'unknown';

/** A database write: a Kysely write builder or raw SQL that writes (`statement`), or a transaction opened on a handle (`transaction`). */
export interface DatabaseWrite extends EffectSite {
  readonly what: 'statement' | 'transaction';
  readonly through: WriteChannel;
  /** The handle as written (`db`, `services.pool`), when it comes from outside; else null. */
  readonly handle: string | null;
}

/** A method call on an object from outside the handler's context (`services.email.send(...)`). */
export interface ClientCall extends EffectSite {
  /** Identity of the object, the same wherever the handlers reach it (e.g. a closure's `services.email`). */
  readonly client: string;
  /** The object as written at the call (`services.email`). */
  readonly clientText: string;
  /** The handler waits for the call (awaits it, returns it, chains `.then`): what a call of another system looks like. */
  readonly awaited: boolean;
}

/** What one handler function does, with what its same-project helpers do. */
export interface HandlerEffects {
  readonly writes: readonly DatabaseWrite[];
  /** Calls through objects from outside the context, database handles excluded (see `databaseClients`). */
  readonly clientCalls: readonly ClientCall[];
  /** Identities of the outside objects the handler uses as a database (query builders, `.query(...)`). */
  readonly databaseClients: readonly string[];
  /** Calls of the global `fetch`. */
  readonly fetches: readonly EffectSite[];
  /**
   * The handler reads `key` from its context, or hands its context to something codegen cannot
   * follow (which may read it).
   */
  readonly readsKey: boolean;
}
