-- findWindowStatement: keep 'first' — the run of the key's open debounce window, left as it is
--
-- $1 = "digest"
-- $2 = "digest:c-7"

select "id" from "ledgerflow"."workflow_run" where workflow_name = $1 AND debounce_key = $2 AND debounce_open AND status = 'pending' AND fencing_token = 0 and run_after > statement_timestamp();
