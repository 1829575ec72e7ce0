-- ledgerflow core migration 0015: retention of compensated runs.
--
-- A run that compensated ends `compensated` or `compensation_failed` (core 0013): both are
-- finished runs, pruned like completed, failed and cancelled ones (`ledgerflow prune`,
-- runtime/retention/prune.ts) under the same rules — finished before the cut-off, no open intent
-- (a compensation_failed run may keep one until the reconciler or an operator settles it), no
-- child left, not the child of an unfinished run. Their tombstone in run_archive keeps the status
-- they ended with, and their recorded ledger rows (the step's effect and its compensation's)
-- go to effect_archive.

ALTER TABLE ledgerflow.run_archive DROP CONSTRAINT run_archive_status_check;
ALTER TABLE ledgerflow.run_archive ADD CONSTRAINT run_archive_status_check
    CHECK (status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed'));

-- The prune batches' index (core 0008), over every final status.
DROP INDEX ledgerflow.workflow_run_finished_idx;
CREATE INDEX workflow_run_finished_idx ON ledgerflow.workflow_run (finished_at, id)
    WHERE status IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed');
