-- ledgerflow core migration 0002: the reconcile horizon is data on the intent row.
--
-- An open intent (status 'intent') is an external call whose outcome is unknown until its
-- horizon: the intent commit's time + the writer's lease + the step's perform timeout. Until
-- 0002 every reader recomputed it with its own lease setting; now the writer stores it, and the
-- reconciler uses the same column as the intent's next-ask time (with backoff per intent), so a
-- pass selects only what is due, through an index.
--
-- reconcile_after     when the intent may be reconciled (asked about) next; NULL unless 'intent'
-- reconcile_attempts  how many times the provider was asked about this intent

ALTER TABLE ledgerflow.step_effect
    ADD COLUMN reconcile_after    timestamptz,
    ADD COLUMN reconcile_attempts integer NOT NULL DEFAULT 0 CHECK (reconcile_attempts >= 0);

-- Intents left open by an earlier release: their writer's lease and perform timeout were not
-- stored, so they are held back conservatively, for an hour after they were written. (A
-- deployment whose lease + perform timeout exceeds an hour must settle its open intents before
-- upgrading.)
UPDATE ledgerflow.step_effect
   SET reconcile_after = intent_at + interval '1 hour'
 WHERE status = 'intent';

ALTER TABLE ledgerflow.step_effect
    ADD CONSTRAINT step_effect_intent_has_horizon CHECK (status <> 'intent' OR reconcile_after IS NOT NULL);

DROP INDEX ledgerflow.step_effect_open_intent_idx;
CREATE INDEX step_effect_open_intent_idx ON ledgerflow.step_effect (reconcile_after) WHERE status = 'intent';
