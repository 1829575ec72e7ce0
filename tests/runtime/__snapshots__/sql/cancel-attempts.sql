-- cancelAttemptsStatement: the cancelled run's open attempt abandoned
--
-- $1 = "abandoned"
-- $2 = {"name":"Cancelled","message":"the run was cancelled"}
-- $3 = "00000000-0000-4000-8000-000000000001"
-- $4 = "running"

update "ledgerflow"."step_attempt" set "status" = $1, "finished_at" = now(), "error" = $2 where "run_id" = $3 and "status" = $4;
