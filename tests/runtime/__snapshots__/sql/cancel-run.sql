-- cancelRunStatement: cancel a run that is not final yet, fencing its worker out
--
-- $1 = "cancelled"
-- $2 = null
-- $3 = null
-- $4 = "00000000-0000-4000-8000-000000000001"
-- $5 = "pending"
-- $6 = "running"
-- $7 = "needs_reconciliation"

update "ledgerflow"."workflow_run" set "status" = $1, "finished_at" = now(), "updated_at" = now(), "lease_owner" = $2, "lease_expires_at" = $3, "fencing_token" = fencing_token + 1 where "id" = $4 and "status" in ($5, $6, $7) returning "id";
