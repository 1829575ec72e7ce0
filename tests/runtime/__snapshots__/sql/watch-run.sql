-- watchRunStatement: waitForRun marks an unsettled run as waited for and reads its status in the same statement
--
-- $1 = true
-- $2 = "00000000-0000-4000-8000-000000000001"
-- $3 = "completed"
-- $4 = "failed"
-- $5 = "cancelled"
-- $6 = "needs_reconciliation"
-- $7 = "compensated"
-- $8 = "compensation_failed"
-- $9 = false

update "ledgerflow"."workflow_run" set "notify_settled" = $1 where "id" = $2 and "status" not in ($3, $4, $5, $6, $7, $8) and "notify_settled" = $9 returning "status";
