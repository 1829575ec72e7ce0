-- closeWindowStatement: a window that is over while its run is still pending and unclaimed is closed (debounce_open = false)
--
-- $1 = false
-- $2 = "digest"
-- $3 = "digest:c-7"

update "ledgerflow"."workflow_run" set "debounce_open" = $1, "updated_at" = statement_timestamp() where workflow_name = $2 AND debounce_key = $3 AND debounce_open AND status = 'pending' AND fencing_token = 0 and run_after <= statement_timestamp();
