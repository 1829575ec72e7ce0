-- ledgerflow core migration 0010: the indexes the dashboard lists runs and open intents by.
--
-- Every list is keyset-paged (never OFFSET) and must cost the same on a million runs as on a
-- hundred: each page is an index range read in order, `LIMIT n + 1` rows, never a scan and sort
-- of every run that matches. The runs list orders by (created_at, id) descending; the id breaks
-- ties between runs created in the same microsecond, so both are in the index.
--
-- workflow_run_status_created_idx    a status (the dashboard reads one range per status and
--                                    merges them, so "all statuses" is 7 short ranges, not a
--                                    sort); replaces workflow_run_status_idx (status, created_at)
--                                    of 0001, which it covers
-- workflow_run_version_created_idx   a workflow, a version and a status; a workflow without a
--                                    version is one range per (version, status), merged the same way
-- workflow_run_dedupe_prefix_idx     a dedupe key, exactly or by prefix: byte order (COLLATE "C"),
--                                    so a prefix is the range [prefix, next prefix); also serves
--                                    `runs --dedupe-key` without a workflow (the UNIQUE
--                                    (workflow_name, dedupe_key) index cannot), compared COLLATE "C".
--                                    One index for both: every index on workflow_run costs a write
--                                    on every update of a run (status is indexed: no HOT updates)
-- step_effect_open_intent_age_idx    open intents, oldest first (only rows in status 'intent')

DROP INDEX ledgerflow.workflow_run_status_idx;
CREATE INDEX workflow_run_status_created_idx ON ledgerflow.workflow_run (status, created_at, id);
CREATE INDEX workflow_run_version_created_idx
    ON ledgerflow.workflow_run (workflow_name, workflow_version, status, created_at, id);
CREATE INDEX workflow_run_dedupe_prefix_idx ON ledgerflow.workflow_run (dedupe_key COLLATE "C", id)
    WHERE dedupe_key IS NOT NULL;
CREATE INDEX step_effect_open_intent_age_idx ON ledgerflow.step_effect (intent_at, workflow_id, step_name, idempotency_key)
    WHERE status = 'intent';
