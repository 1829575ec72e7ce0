-- ledgerflow core migration 0006: debounced starts.
--
-- A start with a debounce key opens a window: its run is inserted `pending` with run_after = the
-- end of the window (database time), so no worker claims it before. Later starts of the same
-- workflow with the same key, while the window is open, join that run instead of creating one
-- (keep 'first': the run stays as it is; keep 'last': their input replaces its input and the end of
-- the window moves on). The window is open while ALL of these hold:
--   status = 'pending'      a cancelled run, or one a worker holds, has no window
--   fencing_token = 0       never claimed: every claim bumps the token, so a run that was claimed
--                           and went back to `pending` (a retry) is never joined
--   debounce_open           false once a later start found the window over before a worker
--                           claimed the run (it then stays pending and is claimed as usual)
--   run_after > statement_timestamp()   not due yet (the one condition that is not indexable)
-- A start that finds the window over sets debounce_open = false before it opens a new window, so
-- that at most one run per (workflow, key) is in the indexed state below. Concurrent starts
-- cannot open two windows: the loser's INSERT … ON CONFLICT DO NOTHING waits for the winner's
-- commit, inserts nothing, and joins the winner's window as a later start.
--
-- debounce_key    the key the run was started with (kept after the window closes, for inspection)
-- debounce_open   see above; false for runs started without a debounce key

ALTER TABLE ledgerflow.workflow_run
    ADD COLUMN debounce_key  text,
    ADD COLUMN debounce_open boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT workflow_run_debounce_open_check CHECK (NOT debounce_open OR debounce_key IS NOT NULL),
    -- A dedupe key names one run forever; a debounce key one run per window. The client refuses both at once.
    ADD CONSTRAINT workflow_run_debounce_dedupe_check CHECK (debounce_key IS NULL OR dedupe_key IS NULL);

CREATE UNIQUE INDEX workflow_run_debounce_idx ON ledgerflow.workflow_run (workflow_name, debounce_key)
    WHERE debounce_open AND status = 'pending' AND fencing_token = 0;
