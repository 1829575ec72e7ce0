-- ledgerflow core migration 0011: a notification when a run that somebody waits for settles.
--
-- `client.waitForRun` (and `startAndWait`) sleep until the run is completed, failed, cancelled or
-- parked in needs_reconciliation, and are woken by a NOTIFY on `ledgerflow_run_settled` whose
-- payload is the run id. PostgreSQL serializes the commits of every transaction that sent a
-- NOTIFY on one global lock, so a notification per settled run would tax every completion,
-- watched or not. Only a run with `notify_settled` notifies: a waiter sets it (startAndWait at the
-- insert; waitForRun with one UPDATE that also returns the status it re-reads), and the trigger
-- below sends the NOTIFY in the transaction that settles the run, whoever settles it — a worker's
-- commit, a failure, the deadline, a client's or operator's cancel, the reconciler, a parent's
-- cascade (core 0003) — so no settling path can forget it.
--
-- No lost wake-up: the mark and the settle both update the run's row. If the mark commits first,
-- the settling UPDATE builds its new row on the marked one (READ COMMITTED re-reads a row updated
-- concurrently) and the trigger sees the mark; if the settle commits first, the mark's UPDATE
-- re-reads the settled row and its waiter returns at once.
--
-- A constant default: adding the column rewrites no row. The WHEN clause is evaluated in the
-- server without calling the function, so an unwatched run's settle costs one boolean test.

ALTER TABLE ledgerflow.workflow_run ADD COLUMN notify_settled boolean NOT NULL DEFAULT false;

CREATE FUNCTION ledgerflow.run_settled_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ledgerflow_run_settled', NEW.id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER workflow_run_settled_notify
    AFTER UPDATE OF status ON ledgerflow.workflow_run
    FOR EACH ROW
    WHEN (NEW.notify_settled AND OLD.status IS DISTINCT FROM NEW.status
          AND NEW.status IN ('completed', 'failed', 'cancelled', 'needs_reconciliation'))
    EXECUTE FUNCTION ledgerflow.run_settled_notify();
