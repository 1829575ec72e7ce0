-- replaceInWindowStatement: keep 'last' — the open window's run gets this start's input, version, deadline and priority; its end moves on (maxWaitMs 300 000)
--
-- $1 = "{\"customerId\":\"c-7\"}"
-- $2 = 2
-- $3 = 60000
-- $4 = 300000
-- $5 = 60000
-- $6 = 300000
-- $7 = 600000
-- $8 = 5
-- $9 = "digest"
-- $10 = "digest:c-7"

update "ledgerflow"."workflow_run" set "input" = $1, "workflow_version" = $2, "run_after" = greatest(run_after, least(statement_timestamp() + ($3::double precision * interval '1 millisecond'), created_at + ($4::double precision * interval '1 millisecond'))), "deadline_at" = greatest(run_after, least(statement_timestamp() + ($5::double precision * interval '1 millisecond'), created_at + ($6::double precision * interval '1 millisecond'))) + ($7::double precision * interval '1 millisecond'), "priority" = $8, "updated_at" = statement_timestamp() where workflow_name = $9 AND debounce_key = $10 AND debounce_open AND status = 'pending' AND fencing_token = 0 and run_after > statement_timestamp() returning "id";
