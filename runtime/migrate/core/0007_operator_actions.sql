-- ledgerflow core migration 0007: operator actions — retry a failed or cancelled run, resolve an
-- open intent by hand, pause a queue — each written to an audit table in the same transaction.
--
-- workflow_run.budget_step / budget_base
--   An operator's retry gives the step the run stopped at a fresh attempt budget. Attempts are
--   history (their numbers keep growing), so the budget is counted from a base: the attempts of
--   `budget_step` numbered <= `budget_base` were made before the retry and count toward neither
--   maxAttempts nor the crash limit. Every statement that counts a step's failed or crashed
--   attempts reads them (claim, failure commit, reconciler claim). NULL / 0: nothing excluded.
--   Only the step the run stopped at has attempts before a retry (later steps never ran), so one
--   step per run is enough; a later retry at another step replaces it.

ALTER TABLE ledgerflow.workflow_run
    ADD COLUMN budget_step text,
    ADD COLUMN budget_base integer NOT NULL DEFAULT 0 CHECK (budget_base >= 0);

-- Who did what, when and why: one row per operator action that changed something, written by the
-- action's own transaction (an action that is refused, or changes nothing, writes none).
--   action   cancel | retry | resolve-found | resolve-not-found | pause-queue | resume-queue
--            | pause-schedule | resume-schedule
--   run_id   the run acted on (no foreign key: the trail outlives a deleted run)
--   target   what else was acted on: the effect's idempotency key, the queue, the schedule
--   detail   what the action found and did (previous status, recorded output, …)
CREATE TABLE ledgerflow.operator_action (
    id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT statement_timestamp(),
    actor   text        NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
    action  text        NOT NULL CHECK (action IN ('cancel', 'retry', 'resolve-found', 'resolve-not-found', 'pause-queue',
                                                   'resume-queue', 'pause-schedule', 'resume-schedule')),
    run_id  uuid,
    target  text,
    reason  text        NOT NULL CHECK (length(reason) BETWEEN 1 AND 2000),
    detail  jsonb       NOT NULL DEFAULT '{}'::jsonb
);

CREATE INDEX operator_action_run_idx ON ledgerflow.operator_action (run_id, id) WHERE run_id IS NOT NULL;
