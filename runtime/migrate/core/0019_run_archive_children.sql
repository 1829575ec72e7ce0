-- ledgerflow core migration 0019: the archived children of a run, found by an index.
--
-- A retry resumes a failed or cancelled run at the step it stopped at; a `child` or `forEach` step
-- there reads its children again. Prune keeps such children while their parent stays (they go in
-- the pass that prunes the parent too, children first), but a pass stopped between those batches,
-- or run before this rule, can leave the parent with children in run_archive. `retryRun` refuses
-- such a parent, and a children step that meets a pruned child fails loudly instead of completing
-- with fewer results: both look for archived children by parent_run_id, which had no index (the
-- archive may hold millions of tombstones). Partial: most archived runs are no one's children.

CREATE INDEX run_archive_parent_idx ON ledgerflow.run_archive (parent_run_id) WHERE parent_run_id IS NOT NULL;
