import type { Transaction } from 'kysely';
import { shapeHash } from 'ledgerflow/dsl';
import {
  bindHandlers,
  found,
  NonRetryableError,
  notFound,
  unknownOutcome,
  type WorkflowRegistration,
} from 'ledgerflow/runtime';
import { computeOutput, effectOutput, type Composition, type FuzzInput, type KidInput } from './compose.js';
import type { HttpFuzzDesk } from './fuzz-desk.js';

/**
 * The handlers of a composition's workflows: every one runs inside a desk span (the desk sees
 * it start and end), returns what the model predicts (compose.ts), and fails, reaches the
 * provider or asks to be killed where the composition says. Transactional effects write a row
 * into `fuzz_app.applied` (no unique constraint: a second write would be counted, not refused).
 */
export const FUZZ_APP_SQL = `
CREATE SCHEMA IF NOT EXISTS fuzz_app;
CREATE TABLE IF NOT EXISTS fuzz_app.applied (id bigserial PRIMARY KEY, run_id uuid NOT NULL, key text NOT NULL, kind text NOT NULL);
-- Every grant a rate window counts, kept after the window drops it: the rate check reads the
-- database's own clock (granted_at), not the handlers' start times.
CREATE TABLE IF NOT EXISTS fuzz_app.grant_log (id bigserial PRIMARY KEY, queue text NOT NULL, partition text NOT NULL, granted_at timestamptz NOT NULL);
CREATE OR REPLACE FUNCTION fuzz_app.log_grant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fuzz_app.grant_log (queue, partition, granted_at) VALUES (NEW.queue, NEW.partition, NEW.granted_at);
    RETURN NULL;
END
$$;
CREATE TRIGGER fuzz_log_grant AFTER INSERT ON ledgerflow.queue_grant FOR EACH ROW EXECUTE FUNCTION fuzz_app.log_grant();
-- Every run a prune deleted, as it was: a run that became final between the driver's snapshot of
-- final runs and the prune's delete is known by this alone.
CREATE TABLE IF NOT EXISTS fuzz_app.pruned_run (id uuid NOT NULL, tag text, status text NOT NULL);
CREATE OR REPLACE FUNCTION fuzz_app.log_pruned() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fuzz_app.pruned_run (id, tag, status) VALUES (OLD.id, OLD.input->>'tag', OLD.status);
    RETURN NULL;
END
$$;
CREATE TRIGGER fuzz_log_pruned AFTER DELETE ON ledgerflow.workflow_run FOR EACH ROW EXECUTE FUNCTION fuzz_app.log_pruned();
`;

interface AppDatabase {
  'fuzz_app.applied': { id?: number; run_id: string; key: string; kind: string };
}

interface Ctx {
  readonly runId: string;
  readonly workflowName: string;
  readonly stepName: string;
  readonly attempt: number;
  readonly input: FuzzInput;
  readonly steps: Readonly<Record<string, unknown>>;
}
interface KeyedCtx extends Ctx {
  readonly key: string;
}
interface TxCtx extends KeyedCtx {
  readonly tx: Transaction<AppDatabase>;
  record(output: unknown): unknown;
}

/** The original key an undo is for: the step's recorded output names it (`ref:<key>`). */
function originalKey(steps: Readonly<Record<string, unknown>>, step: string): string {
  return (steps[step] as { ref: string }).ref.slice('ref:'.length);
}

export function fuzzRegistrations(composition: Composition, desk: HttpFuzzDesk): WorkflowRegistration[] {
  const handlers: Record<string, unknown> = {};
  for (const plan of composition.steps) {
    switch (plan.kind) {
      case 'compute':
        handlers[plan.name] = (ctx: Ctx) =>
          desk.span(ctx, async () => {
            if (plan.failFirst && ctx.attempt === 1)
              throw new NonRetryableError(`fuzz: ${plan.name} fails for good on its first attempt (designed)`);
            return computeOutput(ctx.input.tag, plan);
          });
        break;
      case 'transactional':
        handlers[plan.name] = (ctx: TxCtx) =>
          desk.span(ctx, async () => {
            if (plan.failFirst && ctx.attempt === 1)
              throw new Error(`fuzz: ${plan.name} fails once (designed, retryable)`);
            await ctx.tx
              .insertInto('fuzz_app.applied')
              .values({ run_id: ctx.runId, key: ctx.key, kind: 'do' })
              .execute();
            return ctx.record(effectOutput(ctx.key, false));
          });
        if (plan.compensate) {
          handlers[`${plan.name}_undo`] = (ctx: TxCtx) =>
            desk.span(ctx, async () => {
              const of = originalKey(ctx.steps, plan.name);
              await ctx.tx
                .insertInto('fuzz_app.applied')
                .values({ run_id: ctx.runId, key: of, kind: 'undo' })
                .execute();
              return ctx.record({ undone: of });
            });
        }
        break;
      case 'external':
        handlers[plan.name] = {
          perform: (ctx: KeyedCtx) =>
            desk.span(ctx, async () => {
              if (plan.failFirst && ctx.attempt === 1)
                throw new Error(`fuzz: ${plan.name} fails once before the provider (designed, retryable)`);
              return desk.apply({
                key: ctx.key,
                dedupe: plan.mode === 'idempotent',
                oversized: plan.oversized,
                killAfter: plan.killAfterApply && ctx.attempt === 1,
              });
            }),
          ...(plan.mode === 'idempotent'
            ? {}
            : {
                reconcile: async (ctx: KeyedCtx) => {
                  if (plan.mode === 'unknown')
                    return unknownOutcome('fuzz: this provider cannot be asked (an operator resolves it)');
                  const answer = await desk.find(ctx.key);
                  return answer === undefined ? notFound() : found(answer);
                },
              }),
        };
        if (plan.compensate)
          handlers[`${plan.name}_undo`] = externalUndo(desk, (ctx) => originalKey(ctx.steps, plan.name), 0);
        break;
      default:
        break;
    }
  }
  const kidHandlers: Record<string, unknown> = {
    kdone: (ctx: Ctx & { input: KidInput }) =>
      desk.span(ctx, async () => {
        if (ctx.input.fail) throw new NonRetryableError(`fuzz: child ${ctx.input.tag} fails for good (designed)`);
        return { v: `${ctx.input.tag}:kdone` };
      }),
  };
  if (composition.kidPlan.effect) {
    kidHandlers['keffect'] = {
      perform: (ctx: KeyedCtx) =>
        desk.span(ctx, () => desk.apply({ key: ctx.key, dedupe: true, oversized: false, killAfter: false })),
    };
    // A slow undo: a parent's cancel has time to land while the child compensates.
    kidHandlers['kundo'] = externalUndo(desk, (ctx) => originalKey(ctx.steps, 'keffect'), 150);
  }
  return [
    bindHandlers(composition.kid, kidHandlers as never, shapeHash(composition.kid)),
    bindHandlers(composition.root, handlers as never, shapeHash(composition.root)),
  ];
}

function externalUndo(desk: HttpFuzzDesk, of: (ctx: KeyedCtx) => string, delayMs: number) {
  return {
    perform: (ctx: KeyedCtx) =>
      desk.span(ctx, async () => {
        if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
        return desk.undo(ctx.key, of(ctx));
      }),
    reconcile: async (ctx: KeyedCtx) => {
      const answer = await desk.find(ctx.key);
      return answer === undefined ? notFound() : found(answer);
    },
  };
}
