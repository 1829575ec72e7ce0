-- ledgerflow core migration 0018: queue seams (issue 24, items 4 and 5).
--
-- 1. A run that starts compensating leaves its queues. Compensations hold no queue slot and no
--    place in line (DESIGN.md "Compensations"; the driver never asks for one for them), but a
--    run that started compensating — a cancel with compensate, a failure commit, a deadline, the
--    reconciler finding an exhausted step's effect — kept the slots and waiter rows it had until it
--    settled: the next grant handed the slot to the compensating run, which never used it, the
--    next real waiter stayed waiting, and a compensation parked for reconciliation held the slot
--    until an operator acted. `compensation` goes from NULL to a reason exactly when a run starts
--    compensating, on every path, so a trigger on that change gives everything back and grants
--    the freed slots to the next waiters, in the same transaction — the same release a settling
--    run gets (run_settled_queues, core 0004: every slot and place in line of the run).
--
-- 2. A grant is dated after the queue's lock is taken. queue_grant (core 0004) read
--    statement_timestamp() when it began, before it waited for the queue's counter-row lock; a
--    grant that waited was dated in the past, so its row left the sliding window early and the
--    next grant came sooner than the rate limit allows in real time ("1 per 2 s" handlers started
--    120–200 ms apart). It now reads clock_timestamp() once the lock is held and uses that one
--    instant for everything it compares and writes: expiring old grants, counting the windows,
--    when a window opens, the slot's and grant's granted_at, the round-robin turn and the woken
--    run's run_after. A claim compares run_after with its own statement_timestamp(), which is
--    later than any instant read inside a transaction it can see. The testing kit's clock
--    (runtime/testing/test-clock.ts) moves clock_timestamp() as well. The whole body of 0004's
--    function follows, with that change only.
--
-- 3. queue_acquire looks for the run's slot again once it holds the queue's lock. It looked only
--    before taking the lock; a grant holding the lock meanwhile could give the run its slot and
--    delete its place in line, and the ask then put it in line again: a run holding a slot and a
--    place in line for the same step, whose next grant failed on queue_slot's key — inside
--    whatever transaction released a slot (a step's commit), again at every retry. Grants dated
--    after the lock (2) made the window longer in real time and the race easy to hit (the queue
--    fleet test's three workers stopped for good). The whole body of 0004's function follows, with
--    that check added.

CREATE TRIGGER workflow_run_compensating_queues
    AFTER UPDATE OF compensation ON ledgerflow.workflow_run
    FOR EACH ROW
    WHEN (OLD.compensation IS NULL AND NEW.compensation IS NOT NULL)
    EXECUTE FUNCTION ledgerflow.run_settled_queues();

-- Grants free slots of queue `q` to its waiters, best first, until a limit stops it; wakes each
-- waiter it grants. If only a rate limit stops it while waiters remain, the best waiter is woken
-- when the window next admits a grant (it asks again, which grants). Returns the number of grants.
-- The queue's row is read after its counter row is locked, so a pause (which takes that lock) is
-- seen by every grant after it; a paused queue grants nothing and its rate-limit wake-up
-- (next_token_at) is cleared, so no waiter is woken to ask again while it is paused.
CREATE OR REPLACE FUNCTION ledgerflow.queue_grant(q text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    qrow    ledgerflow.queue;
    g       ledgerflow.queue_partition;
    p       ledgerflow.queue_partition;
    w       ledgerflow.queue_waiter;
    at      timestamptz;
    gcount  integer;
    granted integer := 0;
    next_token timestamptz;
BEGIN
    SELECT * INTO g FROM ledgerflow.queue_partition WHERE queue = q AND partition = '' FOR UPDATE;
    -- The grant's time, read once the lock is held (not when the statement began, before it waited
    -- for the lock): every grant of the queue is then dated in the order the lock serialized them,
    -- and the window below is measured on that one clock.
    at := clock_timestamp();
    SELECT * INTO qrow FROM ledgerflow.queue WHERE name = q;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    IF qrow.paused THEN
        UPDATE ledgerflow.queue_partition SET next_token_at = NULL WHERE queue = q AND partition = '' AND next_token_at IS NOT NULL;
        RETURN 0;
    END IF;
    DELETE FROM ledgerflow.queue_grant
     WHERE queue = q
       AND granted_at <= at - greatest(coalesce(qrow.rate_period_ms, 0), coalesce(qrow.partition_rate_period_ms, 0)) * interval '1 millisecond';
    gcount := CASE WHEN qrow.rate_limit IS NULL THEN NULL ELSE ledgerflow.queue_window(q, '', qrow.rate_period_ms, at) END;
    LOOP
        EXIT WHEN qrow.concurrency IS NOT NULL AND g.in_flight >= qrow.concurrency;
        IF gcount IS NOT NULL AND gcount >= qrow.rate_limit THEN
            next_token := ledgerflow.queue_window_opens(q, '', qrow.rate_period_ms, at);
            EXIT;
        END IF;
        SELECT * INTO p FROM ledgerflow.queue_partition pp
         WHERE pp.queue = q AND pp.partition <> '' AND pp.waiting > 0
           AND (qrow.partition_concurrency IS NULL OR pp.in_flight < qrow.partition_concurrency)
           AND (qrow.partition_rate_limit IS NULL
                OR ledgerflow.queue_window(q, pp.partition, qrow.partition_rate_period_ms, at) < qrow.partition_rate_limit)
         ORDER BY pp.top_priority DESC, pp.last_granted_at NULLS FIRST
         LIMIT 1
           FOR UPDATE;
        IF NOT FOUND THEN
            -- Partitions stopped by their own rate limit only: look again when the first window opens.
            IF qrow.partition_rate_limit IS NOT NULL THEN
                SELECT min(ledgerflow.queue_window_opens(q, pp.partition, qrow.partition_rate_period_ms, at))
                  INTO next_token
                  FROM ledgerflow.queue_partition pp
                 WHERE pp.queue = q AND pp.partition <> '' AND pp.waiting > 0
                   AND (qrow.partition_concurrency IS NULL OR pp.in_flight < qrow.partition_concurrency);
            END IF;
            EXIT;
        END IF;
        SELECT * INTO w FROM ledgerflow.queue_waiter x
         WHERE x.queue = q AND x.partition = p.partition
         ORDER BY x.priority DESC, x.enqueued_at
         LIMIT 1
           FOR UPDATE;
        IF NOT FOUND THEN
            UPDATE ledgerflow.queue_partition SET waiting = 0, top_priority = NULL WHERE queue = q AND partition = p.partition;
            CONTINUE;
        END IF;
        DELETE FROM ledgerflow.queue_waiter WHERE run_id = w.run_id AND step_name = w.step_name AND queue = q;
        INSERT INTO ledgerflow.queue_slot (queue, partition, run_id, step_name, granted_at)
        VALUES (q, p.partition, w.run_id, w.step_name, at);
        IF qrow.rate_limit IS NOT NULL THEN
            INSERT INTO ledgerflow.queue_grant (queue, partition, granted_at) VALUES (q, '', at);
            gcount := gcount + 1;
        END IF;
        IF qrow.partition_rate_limit IS NOT NULL THEN
            INSERT INTO ledgerflow.queue_grant (queue, partition, granted_at) VALUES (q, p.partition, at);
        END IF;
        UPDATE ledgerflow.queue_partition
           SET in_flight = in_flight + 1, waiting = greatest(waiting - 1, 0), last_granted_at = at,
               top_priority = (SELECT max(x.priority) FROM ledgerflow.queue_waiter x WHERE x.queue = q AND x.partition = p.partition)
         WHERE queue = q AND partition = p.partition;
        g.in_flight := g.in_flight + 1;
        UPDATE ledgerflow.workflow_run SET run_after = at WHERE id = w.run_id AND status = 'waiting';
        PERFORM pg_notify('ledgerflow_runs', w.run_id::text);
        granted := granted + 1;
    END LOOP;
    UPDATE ledgerflow.queue_partition SET in_flight = g.in_flight, next_token_at = next_token WHERE queue = q AND partition = '';
    IF next_token IS NOT NULL THEN
        -- Wake the best waiter when the window opens; the others stay asleep.
        UPDATE ledgerflow.workflow_run r SET run_after = least(r.run_after, next_token)
         WHERE r.id = ledgerflow.queue_first_in_line(q) AND r.status = 'waiting';
    END IF;
    RETURN granted;
END
$$;

-- Asks for a slot of queue `q`, partition `part`, for `run` (`step` = '' for the whole run): NULL
-- when the run holds one (already, or granted now), otherwise when to look again — 'infinity'
-- (a grant wakes it) or when the rate limit's window next admits a grant, if this run is first in line.
CREATE OR REPLACE FUNCTION ledgerflow.queue_acquire(q text, part text, run uuid, step text, prio integer)
RETURNS timestamptz LANGUAGE plpgsql AS $$
DECLARE
    qrow ledgerflow.queue;
    at   timestamptz := statement_timestamp();
BEGIN
    IF EXISTS (SELECT 1 FROM ledgerflow.queue_slot WHERE run_id = run AND step_name = step AND queue = q) THEN
        RETURN NULL;
    END IF;
    SELECT * INTO qrow FROM ledgerflow.queue WHERE name = q;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'queue "%" is not registered; start a worker that serves it', q USING ERRCODE = 'undefined_object';
    END IF;
    -- The queue's row first (the lock order of queue_grant), then the partition's.
    PERFORM 1 FROM ledgerflow.queue_partition WHERE queue = q AND partition = '' FOR UPDATE;
    -- Asked again under the lock: a grant that held it while this call waited may have given this
    -- run the slot (and deleted its place in line); a new place in line now would be granted a
    -- second slot for the same step (a duplicate key in queue_grant) or linger beside the slot.
    IF EXISTS (SELECT 1 FROM ledgerflow.queue_slot WHERE run_id = run AND step_name = step AND queue = q) THEN
        RETURN NULL;
    END IF;
    INSERT INTO ledgerflow.queue_partition (queue, partition) VALUES (q, part) ON CONFLICT DO NOTHING;
    IF NOT EXISTS (SELECT 1 FROM ledgerflow.queue_waiter WHERE run_id = run AND step_name = step AND queue = q) THEN
        INSERT INTO ledgerflow.queue_waiter (queue, partition, run_id, step_name, priority, enqueued_at)
        VALUES (q, part, run, step, prio, at);
        UPDATE ledgerflow.queue_partition
           SET waiting = waiting + 1, top_priority = greatest(coalesce(top_priority, prio), prio)
         WHERE queue = q AND partition = part;
    END IF;
    PERFORM ledgerflow.queue_grant(q);
    IF EXISTS (SELECT 1 FROM ledgerflow.queue_slot WHERE run_id = run AND step_name = step AND queue = q) THEN
        RETURN NULL;
    END IF;
    -- Stopped by a rate limit with this run first in line: it looks again when the window opens
    -- (the grant could not wake it: it is running). Everyone else waits to be woken by a grant.
    IF EXISTS (SELECT 1 FROM ledgerflow.queue_partition WHERE queue = q AND partition = '' AND next_token_at IS NOT NULL)
       AND ledgerflow.queue_first_in_line(q) = run THEN
        RETURN (SELECT next_token_at FROM ledgerflow.queue_partition WHERE queue = q AND partition = '');
    END IF;
    RETURN 'infinity'::timestamptz;
END
$$;
