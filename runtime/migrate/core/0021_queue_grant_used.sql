-- ledgerflow core migration 0021: a rate window counts a grant from when it is used.
--
-- queue_grant (core 0004, 0018) recorded a grant in the rate window (queue_grant rows) when it
-- made it. A grant to a run in line wakes that run, and the run uses the slot only when a worker
-- claims it and its step asks (queue_acquire finds the slot): a moment later normally, but a
-- minute or more later when no worker was free, or the one that would have claimed it died. A
-- grant dated when it was made then left the window before the run used it, and the grants made
-- meanwhile did not count it: the composition fuzzer (seed 20789008, a one-slot queue of 2 per
-- 1 204 ms) saw three handlers start within 489 ms — a woken run's step, claimed late after a
-- worker was killed, and the next two steps of the same run, each under a grant of its own, while
-- the grant log was spaced by the limit. The provider sees calls, not grants.
--
-- Now a granted slot is "not used yet" (queue_slot.used_at NULL) until its run's ask finds it
-- (queue_slot_used, called by queue_acquire whenever it answers NULL); only then is it dated in
-- the window (queue_grant rows at the instant of its use, clock_timestamp()). A rate window
-- counts the grants used in the period AND every slot not used yet, as if it were used now. Why
-- this is exact: let N(t) be, at instant t, the grants dated in (t - period, t] plus the slots
-- not used yet. A grant is made only when N < limit (under the queue's lock) and adds one; a use
-- turns one slot not used yet into one dated now, in one commit, so every snapshot counts it
-- once, either way; time only lowers N. So N never passes the limit, and the dated uses in any
-- period — each handler starts after its use is dated — are at most the limit. A slot given back
-- unused (its run cancelled, its attempt abandoned before it asked) was never dated: no handler
-- ran under it, so it leaves the window with no trace. A grant the asker gets in its own ask is
-- used in the same call, so nothing changes for a queue whose line is empty.
--
-- A window full of slots not used yet has no oldest use to open at: queue_grant then looks again
-- a period from now (the use of one is dated at or after that grant, so it opens no earlier).
--
-- Slots held when this migration runs were dated in the window when they were granted: they
-- count as used then.
--
-- A take-over needs nothing more: the claim that takes a run over closes the dead attempt
-- (abandoned), whose trigger (step_attempt_ended, core 0004) gives its step's slot back; the new
-- attempt asks again, and the dead attempt's use, dated when it asked, stays in the window.

ALTER TABLE ledgerflow.queue_slot ADD COLUMN used_at timestamptz;
UPDATE ledgerflow.queue_slot SET used_at = granted_at;

-- Slots not used yet, per queue and partition: what queue_unused counts (few: woken runs).
CREATE INDEX queue_slot_unused_idx ON ledgerflow.queue_slot (queue, partition) WHERE used_at IS NULL;

-- Slots of queue `q` (of partition `part`; NULL: of every partition) granted and not used yet.
CREATE FUNCTION ledgerflow.queue_unused(q text, part text) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT count(*)::int FROM ledgerflow.queue_slot
     WHERE queue = q AND used_at IS NULL AND (part IS NULL OR partition = part)
$$;

-- The run's slot of queue `q` for `step` is used from now on: dated in the queue's rate windows
-- (and its partition's) at this instant. Nothing when it was used before or is not held.
CREATE FUNCTION ledgerflow.queue_slot_used(q text, run uuid, step text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    s ledgerflow.queue_slot;
    qrow ledgerflow.queue;
BEGIN
    UPDATE ledgerflow.queue_slot SET used_at = clock_timestamp()
     WHERE run_id = run AND step_name = step AND queue = q AND used_at IS NULL
    RETURNING * INTO s;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO qrow FROM ledgerflow.queue WHERE name = q;
    IF qrow.rate_limit IS NOT NULL THEN
        INSERT INTO ledgerflow.queue_grant (queue, partition, granted_at) VALUES (q, '', s.used_at);
    END IF;
    IF qrow.partition_rate_limit IS NOT NULL THEN
        INSERT INTO ledgerflow.queue_grant (queue, partition, granted_at) VALUES (q, s.partition, s.used_at);
    END IF;
END
$$;

-- The whole bodies of 0018's queue_grant and queue_acquire follow, with those changes.

-- Grants free slots of queue `q` to its waiters, best first, until a limit stops it; wakes each
-- waiter it grants. If only a rate limit stops it while waiters remain, the best waiter is woken
-- when the window next admits a grant (it asks again, which grants). Returns the number of grants.
-- The queue's row is read after its counter row is locked, so a pause (which takes that lock) is
-- seen by every grant after it; a paused queue grants nothing and its rate-limit wake-up
-- (next_token_at) is cleared, so no waiter is woken to ask again while it is paused.
-- A rate window counts the grants used in the period (queue_grant rows, dated at their use) and
-- every slot granted but not used yet (queue_unused), as if used now: see queue_slot_used.
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
    gcount := CASE WHEN qrow.rate_limit IS NULL THEN NULL
                   ELSE ledgerflow.queue_window(q, '', qrow.rate_period_ms, at) + ledgerflow.queue_unused(q, NULL) END;
    LOOP
        EXIT WHEN qrow.concurrency IS NOT NULL AND g.in_flight >= qrow.concurrency;
        IF gcount IS NOT NULL AND gcount >= qrow.rate_limit THEN
            -- A window filled by slots not used yet opens a period after their use at the
            -- earliest: look again a period from now (a release of one unused grants at once).
            next_token := coalesce(ledgerflow.queue_window_opens(q, '', qrow.rate_period_ms, at),
                                   at + qrow.rate_period_ms * interval '1 millisecond');
            EXIT;
        END IF;
        SELECT * INTO p FROM ledgerflow.queue_partition pp
         WHERE pp.queue = q AND pp.partition <> '' AND pp.waiting > 0
           AND (qrow.partition_concurrency IS NULL OR pp.in_flight < qrow.partition_concurrency)
           AND (qrow.partition_rate_limit IS NULL
                OR ledgerflow.queue_window(q, pp.partition, qrow.partition_rate_period_ms, at)
                   + ledgerflow.queue_unused(q, pp.partition) < qrow.partition_rate_limit)
         ORDER BY pp.top_priority DESC, pp.last_granted_at NULLS FIRST
         LIMIT 1
           FOR UPDATE;
        IF NOT FOUND THEN
            -- Partitions stopped by their own rate limit only: look again when the first window opens.
            IF qrow.partition_rate_limit IS NOT NULL THEN
                SELECT min(coalesce(ledgerflow.queue_window_opens(q, pp.partition, qrow.partition_rate_period_ms, at),
                                    at + qrow.partition_rate_period_ms * interval '1 millisecond'))
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
        -- Not used yet (used_at NULL): the rate windows count it as now until its run takes it up.
        INSERT INTO ledgerflow.queue_slot (queue, partition, run_id, step_name, granted_at, used_at)
        VALUES (q, p.partition, w.run_id, w.step_name, at, NULL);
        IF gcount IS NOT NULL THEN
            gcount := gcount + 1;
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
-- The slot it answers NULL for is used from then on (queue_slot_used): the run's handler may start.
CREATE OR REPLACE FUNCTION ledgerflow.queue_acquire(q text, part text, run uuid, step text, prio integer)
RETURNS timestamptz LANGUAGE plpgsql AS $$
DECLARE
    qrow ledgerflow.queue;
    at   timestamptz := statement_timestamp();
BEGIN
    IF EXISTS (SELECT 1 FROM ledgerflow.queue_slot WHERE run_id = run AND step_name = step AND queue = q) THEN
        PERFORM ledgerflow.queue_slot_used(q, run, step);
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
        PERFORM ledgerflow.queue_slot_used(q, run, step);
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
        PERFORM ledgerflow.queue_slot_used(q, run, step);
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
