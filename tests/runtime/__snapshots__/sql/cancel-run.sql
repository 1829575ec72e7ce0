-- cancelRunStatement: cancel a run that is not final yet, fencing its worker out
--
-- $1 = "cancelled"
-- $2 = null
-- $3 = null
-- $4 = null
-- $5 = "00000000-0000-4000-8000-000000000001"
-- $6 = "pending"
-- $7 = "running"
-- $8 = "waiting"
-- $9 = "needs_reconciliation"

update "ledgerflow"."workflow_run" set "status" = $1, "finished_at" = statement_timestamp(), "updated_at" = statement_timestamp(), "lease_owner" = $2, "lease_expires_at" = $3, "waiting_for" = $4, "fencing_token" = ledgerflow.next_fencing_token(fencing_token) where "id" = $5 and "status" in ($6, $7, $8, $9) and "compensation" is null returning "id";
