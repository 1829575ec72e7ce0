-- ledgerflow core migration 0022: a queue path without a global lock.
--
-- Every ask and every release of a queue's slot locked the queue's counter row (queue_partition,
-- partition '') inside its transaction, so the asks (one commit each) and the step commits that
-- gave slots back were serialised on that row — each behind the other's WAL flush: a step behind
-- a queue whose limit was never reached ran at a third of an unqueued step's rate at 16 flights.
--
-- The fast path. A queue with only a concurrency limit (no rate limit, no partition limits), asked
-- for by a use without a partition key, while nobody is in its line and it is not paused: the ask
-- (queue_take_fast) takes a NUMBERED slot — a free number in 1..concurrency, tried from a random
-- one — with INSERT ... ON CONFLICT DO NOTHING under the unique index (queue, n). The count is
-- exact without any counter: two slots cannot share a number, and there are `concurrency`
-- numbers. Two asks that pick the same number meet in the unique index: the second waits for the
-- first's commit and then tries another (a conflict with a row being deleted waits for the delete
-- and then inserts). Such a slot is not counted in queue_partition.in_flight (counted = false):
-- nothing shared is written. Its release deletes the row, and only a release that finds runs in
-- line takes the counter row and grants. Every grant made under the counter row takes a number
-- too, so the fast path and the line share one exact count.
--
-- What keeps the line and the fast path apart: an advisory lock per queue (queue_lock /
-- queue_lock_shared, transaction-scoped). Fast asks and every release take it SHARED — they never
-- wait for each other. Whatever changes the line or reads the count to grant from it — an ask
-- that goes to the line (queue_acquire), queue_grant, a pause or resume — takes it EXCLUSIVE,
-- then the counter row as before. Race-freedom in READ COMMITTED (each statement of these
-- functions reads a new snapshot, after the lock it follows):
-- - A fast ask sees the line empty only if no run is in line: runs join the line only under the
--   exclusive lock, which cannot be held while the ask holds the shared one, so every place in
--   line is committed and visible after the shared lock is taken. Seeing one, it goes to the line.
-- - No lost wake-up between a release and a run joining the line: if the release holds the shared
--   lock first, the joiner's exclusive lock waits for the release's commit, and the joiner then
--   sees the slot gone and is granted it; if the joiner holds the exclusive lock first, the
--   release's shared lock waits for the joiner's commit, and the release then sees the run in line
--   and grants (it takes the counter row; the joiner no longer holds it).
-- - in_flight stays exact for whoever reads it under the exclusive lock: that holder first counts
--   the slots taken on the fast path (fold: counted = true, in_flight += their number); none is
--   being taken or given back meanwhile. A release of a counted slot takes the counter row and
--   lowers in_flight, as before. A release holding only the shared lock that grants counts the
--   uncounted slots it sees (none is being taken while runs are in line, by the first point).
-- - No deadlock: no transaction asks for the exclusive lock while it holds the shared one on the
--   same queue (the fast ask is a statement of its own; the worker asks the slow way in a new
--   transaction; a release never takes the exclusive lock — it grants with the shared one and the
--   counter row), and the counter row is only taken after the advisory lock.
-- Not SERIALIZABLE: a conflict would abort the step's commit, which holds the handler's work.
-- Advisory locks rather than a shared row lock: a FOR SHARE on the counter row would write a
-- MultiXact into that hot tuple at every ask and release.
--
-- Rate limits and partition limits keep the exclusive path: a sliding window is a count over
-- time, dated under the lock (0018, 0021), and round-robin between partitions needs each
-- grant's turn recorded. A lowered concurrency limit leaves slots numbered above it held: the
-- fast path is not taken while any is.
--
-- Also: a grant announces on ledgerflow_runs only a run it wakes from the line. A run granted in
-- its own ask is running; a NOTIFY made its ask a notifying commit (serialised by PostgreSQL)
-- and sent every listening worker to claim for nothing.
--
-- The whole bodies of queue_grant (as queue_grant_locked), queue_acquire and queue_release
-- follow with these changes; queue_grant keeps its name and signature for its callers.

ALTER TABLE ledgerflow.queue_slot ADD COLUMN n integer;
ALTER TABLE ledgerflow.queue_slot ADD COLUMN counted boolean NOT NULL DEFAULT true;
UPDATE ledgerflow.queue_slot s SET n = x.rn
  FROM (SELECT run_id, step_name, queue, row_number() OVER (PARTITION BY queue ORDER BY granted_at, run_id, step_name)::int AS rn
          FROM ledgerflow.queue_slot) x
 WHERE s.run_id = x.run_id AND s.step_name = x.step_name AND s.queue = x.queue;
CREATE UNIQUE INDEX queue_slot_number_idx ON ledgerflow.queue_slot (queue, n) WHERE n IS NOT NULL;
CREATE INDEX queue_slot_uncounted_idx ON ledgerflow.queue_slot (queue, partition) WHERE NOT counted;

-- The queue's advisory lock (transaction-scoped): exclusive for the line, shared for fast asks and releases.
CREATE FUNCTION ledgerflow.queue_lock(q text) RETURNS void LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(hashtextextended('ledgerflow.queue:' || q, 0))
$$;
CREATE FUNCTION ledgerflow.queue_lock_shared(q text) RETURNS void LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock_shared(hashtextextended('ledgerflow.queue:' || q, 0))
$$;

-- Slots of queue `q` taken on the fast path and not yet counted in in_flight.
CREATE FUNCTION ledgerflow.queue_uncounted(q text) RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT count(*)::int FROM ledgerflow.queue_slot WHERE queue = q AND NOT counted
$$;

-- A slot number of queue `q` in 1..`lim` that no slot holds, looking from `start` on (wrapping);
-- NULL when all are held. One index probe per number tried: few while the queue is far from full.
CREATE FUNCTION ledgerflow.queue_free_number(q text, lim integer, start integer) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    k integer := ((greatest(start, 1) - 1) % lim) + 1;
BEGIN
    FOR i IN 1 .. lim LOOP
        IF NOT EXISTS (SELECT 1 FROM ledgerflow.queue_slot WHERE queue = q AND n = k) THEN
            RETURN k;
        END IF;
        k := (k % lim) + 1;
    END LOOP;
    RETURN NULL;
END
$$;

-- The fast ask: true when `run` holds its slot of queue `q` for `step` (already, or taken now
-- without the counters), false when it must ask the slow way (ledgerflow.queue_acquire, in a
-- transaction of its own): the queue has a rate or partition limit, the use a partition key,
-- runs are in line, the queue is paused, or no number is free.
CREATE FUNCTION ledgerflow.queue_take_fast(q text, part text, run uuid, step text) RETURNS boolean LANGUAGE plpgsql AS $$
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
        INSERT INTO ledgerflow.queue_slot (queue, partition, run_id, step_name, granted_at, used_at, n, counted)
        VALUES (q, part, run, step, clock_timestamp(), clock_timestamp(), k, false)
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            RETURN true;
        END IF;
        k := k + 1;
    END LOOP;
    RETURN false;
END
$$;

-- Grants free slots of queue `q` to its waiters, under the queue's exclusive lock (see
-- queue_grant_locked). The entry point for callers outside the queue functions.
CREATE OR REPLACE FUNCTION ledgerflow.queue_grant(q text) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ledgerflow.queue_lock(q);
    RETURN ledgerflow.queue_grant_locked(q, true);
END
$$;

-- Gives back the slots a run holds for `step` (NULL: all of them), and with `waiters` its places
-- in line too, and grants the freed slots to the next waiters. Per queue, under its SHARED lock:
-- a slot taken on the fast path is just deleted; the counter row is taken only when a counted
-- slot or a place in line goes, or runs are in line to be granted.
CREATE OR REPLACE FUNCTION ledgerflow.queue_release(run uuid, step text, waiters boolean) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    s record;
    counted_freed integer;
    line_left integer;
BEGIN
    FOR s IN SELECT DISTINCT queue FROM (
                 SELECT queue FROM ledgerflow.queue_slot WHERE run_id = run AND (step IS NULL OR step_name = step)
                 UNION ALL
                 SELECT queue FROM ledgerflow.queue_waiter WHERE waiters AND run_id = run AND (step IS NULL OR step_name = step)) x
             ORDER BY queue LOOP
        PERFORM ledgerflow.queue_lock_shared(s.queue);
        -- Counted slots first: their counter rows are locked (queue row first) before anything is deleted.
        IF EXISTS (SELECT 1 FROM ledgerflow.queue_slot WHERE run_id = run AND queue = s.queue AND counted AND (step IS NULL OR step_name = step))
           OR EXISTS (SELECT 1 FROM ledgerflow.queue_waiter WHERE waiters AND run_id = run AND queue = s.queue AND (step IS NULL OR step_name = step))
           OR EXISTS (SELECT 1 FROM ledgerflow.queue_waiter WHERE queue = s.queue) THEN
            PERFORM 1 FROM ledgerflow.queue_partition WHERE queue = s.queue AND partition = '' FOR UPDATE;
        END IF;
        WITH freed AS (
            DELETE FROM ledgerflow.queue_slot
             WHERE run_id = run AND queue = s.queue AND (step IS NULL OR step_name = step)
            RETURNING queue, partition, counted
        ), counts AS (
            SELECT queue, partition, count(*)::int AS k FROM freed WHERE counted GROUP BY queue, partition
            UNION ALL
            SELECT queue, '', count(*)::int FROM freed WHERE counted GROUP BY queue
        )
        UPDATE ledgerflow.queue_partition p SET in_flight = greatest(p.in_flight - c.k, 0)
          FROM counts c WHERE p.queue = c.queue AND p.partition = c.partition;
        WITH gone AS (
            DELETE FROM ledgerflow.queue_waiter
             WHERE waiters AND run_id = run AND queue = s.queue AND (step IS NULL OR step_name = step)
            RETURNING queue, partition
        )
        UPDATE ledgerflow.queue_partition p
           SET waiting = greatest(p.waiting - g.k, 0),
               top_priority = (SELECT max(x.priority) FROM ledgerflow.queue_waiter x WHERE x.queue = p.queue AND x.partition = p.partition)
          FROM (SELECT queue, partition, count(*)::int AS k FROM gone GROUP BY queue, partition) g
         WHERE p.queue = g.queue AND p.partition = g.partition;
        -- Runs in line (visible: they joined under the exclusive lock): grant them what is free now.
        IF EXISTS (SELECT 1 FROM ledgerflow.queue_waiter WHERE queue = s.queue) THEN
            PERFORM ledgerflow.queue_grant_locked(s.queue, false);
        END IF;
    END LOOP;
END
$$;

-- Grants free slots of queue `q` to its waiters, best first, until a limit stops it; wakes each
-- waiter it grants. The caller holds the queue's advisory lock: exclusive with `fold` (the slots
-- taken on the fast path are counted first), shared without (a release: it counts them as it
-- finds them). Otherwise the body of 0021's queue_grant, with numbered slots and a notification
-- only for a run it wakes.
CREATE FUNCTION ledgerflow.queue_grant_locked(q text, fold boolean) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    qrow    ledgerflow.queue;
    g       ledgerflow.queue_partition;
    p       ledgerflow.queue_partition;
    w       ledgerflow.queue_waiter;
    at      timestamptz;
    gcount  integer;
    granted integer := 0;
    next_token timestamptz;
    -- Slots taken on the fast path and not counted in in_flight (see the header).
    uncounted integer := 0;
    n       integer;
BEGIN
    SELECT * INTO g FROM ledgerflow.queue_partition WHERE queue = q AND partition = '' FOR UPDATE;
    IF fold THEN
        -- The queue's exclusive lock is held: no fast ask or uncounted release is in progress, so
        -- every slot taken without the counters is visible here, and none is being given back.
        WITH folded AS (
            UPDATE ledgerflow.queue_slot SET counted = true WHERE queue = q AND NOT counted RETURNING partition, granted_at
        ), per AS (
            SELECT partition, count(*)::int AS k, max(granted_at) AS last FROM folded GROUP BY partition
            UNION ALL
            SELECT '', count(*)::int, NULL FROM folded HAVING count(*) > 0
        )
        UPDATE ledgerflow.queue_partition pp
           SET in_flight = pp.in_flight + per.k,
               last_granted_at = CASE WHEN per.last IS NULL THEN pp.last_granted_at ELSE greatest(pp.last_granted_at, per.last) END
          FROM per WHERE pp.queue = q AND pp.partition = per.partition;
        SELECT * INTO g FROM ledgerflow.queue_partition WHERE queue = q AND partition = '';
    ELSE
        -- A release holding the shared lock: fast asks may run beside it, but none while runs are
        -- in line (a fast ask goes to the line when it sees one), so the slots taken without the
        -- counters are all visible; one being given back concurrently still counts (its own
        -- release grants after it).
        uncounted := ledgerflow.queue_uncounted(q);
    END IF;
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
        EXIT WHEN qrow.concurrency IS NOT NULL AND g.in_flight + uncounted >= qrow.concurrency;
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
        -- A slot number below the limit (what keeps the count exact beside the fast path); none free: stop.
        n := NULL;
        IF qrow.concurrency IS NOT NULL THEN
            n := ledgerflow.queue_free_number(q, qrow.concurrency, 1);
            EXIT WHEN n IS NULL;
        END IF;
        -- Not used yet (used_at NULL): the rate windows count it as now until its run takes it up.
        INSERT INTO ledgerflow.queue_slot (queue, partition, run_id, step_name, granted_at, used_at, n, counted)
        VALUES (q, p.partition, w.run_id, w.step_name, at, NULL, n, true)
        ON CONFLICT DO NOTHING;
        EXIT WHEN NOT FOUND;
        DELETE FROM ledgerflow.queue_waiter WHERE run_id = w.run_id AND step_name = w.step_name AND queue = q;
        IF gcount IS NOT NULL THEN
            gcount := gcount + 1;
        END IF;
        UPDATE ledgerflow.queue_partition
           SET in_flight = in_flight + 1, waiting = greatest(waiting - 1, 0), last_granted_at = at,
               top_priority = (SELECT max(x.priority) FROM ledgerflow.queue_waiter x WHERE x.queue = q AND x.partition = p.partition)
         WHERE queue = q AND partition = p.partition;
        g.in_flight := g.in_flight + 1;
        -- Only a run parked in line is woken and announced: the asker itself (granted in its own
        -- ask) is running, and a notification for it would only send every worker to claim.
        UPDATE ledgerflow.workflow_run SET run_after = at WHERE id = w.run_id AND status = 'waiting';
        IF FOUND THEN
            PERFORM pg_notify('ledgerflow_runs', w.run_id::text);
        END IF;
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
-- The slow path: the queue's exclusive lock (queue_take_fast is tried first, by the worker).
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
    -- The queue's exclusive lock, then its row (the lock order of queue_grant), then the partition's.
    PERFORM ledgerflow.queue_lock(q);
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
    PERFORM ledgerflow.queue_grant_locked(q, true);
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
