-- ledgerflow core migration 0024: a fast queue slot taken by the claim, with numbers that never wait.
--
-- A step behind a queue limited by concurrency alone asked for its slot in a statement and a commit
-- of its own (queue_take_fast, 0022) before it ran: one more commit and round trip per queued step.
-- The claim now takes that slot in its own statement for the runs it claims whose current step
-- asks for one on the fast path (worker/claim.ts) — so one claim, or one completion commit that
-- carries a fused claim, takes slots for several runs, of one queue or several, in ONE transaction.
--
-- That is new: until now a transaction inserted at most one numbered slot. queue_take_fast picks a
-- number no visible slot holds and inserts it ON CONFLICT DO NOTHING; a slot another transaction
-- has inserted and not committed is invisible, so two transactions could pick the same number and
-- the second waited for the first in the unique index. With several inserts per transaction that
-- wait can close a cycle — T1 holds number 3 and waits for 5, T2 holds 5 and waits for 3 — and a
-- deadlock would abort a claim, or the completion commit carrying it. So a number is now reserved
-- before it is inserted, with a transaction-scoped advisory lock tried without waiting
-- (pg_try_advisory_xact_lock on the queue and the number): a number another transaction is taking
-- is skipped, never waited for. The count stays exact: the unique index (queue, n) is unchanged,
-- and a number is inserted only by its reservation's holder (a grant under the queue's exclusive
-- lock runs while no fast ask does, 0022). A committed slot is seen by the NOT EXISTS that follows
-- the reservation (each statement of the function takes a new snapshot), and a slot being deleted
-- is still seen, and skipped. The rest of the function is 0022's.

CREATE OR REPLACE FUNCTION ledgerflow.queue_take_fast(q text, part text, run uuid, step text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    qrow ledgerflow.queue;
    k    integer;
BEGIN
    IF EXISTS (SELECT 1 FROM ledgerflow.queue_slot WHERE run_id = run AND step_name = step AND queue = q) THEN
        PERFORM ledgerflow.queue_slot_used(q, run, step);
        RETURN true;
    END IF;
    SELECT * INTO qrow FROM ledgerflow.queue WHERE name = q;
    IF NOT FOUND OR part <> '*' OR qrow.rate_limit IS NOT NULL OR qrow.partition_rate_limit IS NOT NULL
       OR qrow.partition_concurrency IS NOT NULL THEN
        RETURN false;
    END IF;
    PERFORM ledgerflow.queue_lock_shared(q);
    -- Read after the shared lock: a pause and every place in line were made under the exclusive one.
    IF (SELECT paused FROM ledgerflow.queue WHERE name = q)
       OR EXISTS (SELECT 1 FROM ledgerflow.queue_waiter WHERE queue = q)
       OR (qrow.concurrency IS NOT NULL AND EXISTS (SELECT 1 FROM ledgerflow.queue_slot WHERE queue = q AND n > qrow.concurrency)) THEN
        RETURN false;
    END IF;
    INSERT INTO ledgerflow.queue_partition (queue, partition) VALUES (q, part) ON CONFLICT DO NOTHING;
    IF qrow.concurrency IS NULL THEN
        INSERT INTO ledgerflow.queue_slot (queue, partition, run_id, step_name, granted_at, used_at, n, counted)
        VALUES (q, part, run, step, clock_timestamp(), clock_timestamp(), NULL, false);
        RETURN true;
    END IF;
    k := 1 + floor(random() * qrow.concurrency)::int;
    FOR tries IN 1 .. 8 LOOP
        k := ledgerflow.queue_free_number(q, qrow.concurrency, k);
        EXIT WHEN k IS NULL;
        -- Reserved first, without waiting: a number another transaction is taking is skipped.
        IF pg_try_advisory_xact_lock(hashtextextended('ledgerflow.queue-slot:' || q || ':' || k, 0))
           AND NOT EXISTS (SELECT 1 FROM ledgerflow.queue_slot WHERE queue = q AND n = k) THEN
            INSERT INTO ledgerflow.queue_slot (queue, partition, run_id, step_name, granted_at, used_at, n, counted)
            VALUES (q, part, run, step, clock_timestamp(), clock_timestamp(), k, false)
            ON CONFLICT DO NOTHING;
            IF FOUND THEN
                RETURN true;
            END IF;
        END IF;
        k := k + 1;
    END LOOP;
    RETURN false;
END
$$;
