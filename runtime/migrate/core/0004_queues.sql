-- ledgerflow core migration 0004: queues — concurrency and rate limits, per partition too,
-- priorities and round-robin fairness between partitions, all held in the database so that they
-- hold across every worker.
--
-- A slot of a queue is held by a run for one step's attempt (a step that names the queue) or for
-- the whole run (a workflow that names it; step_name = ''). A run that needs a slot it cannot
-- get is a waiter: its run is `waiting` (waiting_for.kind = 'queue') with run_after = 'infinity',
-- and it is woken (run_after = now) when a slot is granted to it. Grants happen in ONE function,
-- ledgerflow.queue_grant, called when a run asks for a slot and whenever a slot is given back.
--
-- Counters live in queue_partition: one row per (queue, partition) plus the queue's own row
-- (partition = ''). Every grant locks the queue's row first, then a partition row: grants on one
-- queue are serialized, so `in_flight` can never pass a limit, whatever the number of workers.

CREATE TABLE ledgerflow.queue (
    name                     text        PRIMARY KEY,
    concurrency              integer     CHECK (concurrency >= 1),
    rate_limit               integer     CHECK (rate_limit >= 1),
    rate_period_ms           integer     CHECK (rate_period_ms >= 1),
    partition_concurrency    integer     CHECK (partition_concurrency >= 1),
    partition_rate_limit     integer     CHECK (partition_rate_limit >= 1),
    partition_rate_period_ms integer     CHECK (partition_rate_period_ms >= 1),
    updated_at               timestamptz NOT NULL DEFAULT statement_timestamp(),
    -- A paused queue grants no slot: its waiters stay in line, runs holding slots keep them until
    -- they give them back. Workers registering the queue never touch it (registerQueueStatement).
    paused                   boolean     NOT NULL DEFAULT false,
    CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL)),
    CHECK ((partition_rate_limit IS NULL) = (partition_rate_period_ms IS NULL))
);

-- in_flight        slots held now
-- waiting          waiters queued (partition rows only)
-- top_priority     the highest priority among the partition's waiters
-- last_granted_at  when the partition last got a slot: the round-robin turn
-- next_token_at    (the queue's row) when the last grant stopped at a rate limit: when the oldest
--                  grant in the window leaves it
CREATE TABLE ledgerflow.queue_partition (
    queue           text             NOT NULL REFERENCES ledgerflow.queue (name) ON DELETE CASCADE,
    partition       text             NOT NULL,
    in_flight       integer          NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    waiting         integer          NOT NULL DEFAULT 0 CHECK (waiting >= 0),
    top_priority    integer,
    last_granted_at timestamptz,
    next_token_at   timestamptz,
    PRIMARY KEY (queue, partition)
);

-- The next partition in turn: highest priority first, then the one served longest ago.
CREATE INDEX queue_partition_turn_idx ON ledgerflow.queue_partition (queue, top_priority DESC, last_granted_at NULLS FIRST)
    WHERE waiting > 0 AND partition <> '';

-- Rate limits are sliding windows: a grant is allowed while fewer than `limit` grants of the
-- queue (partition '') or of the partition fall in the last `period`. Rows older than the
-- period are deleted by the next grant of the queue.
CREATE TABLE ledgerflow.queue_grant (
    queue      text        NOT NULL,
    partition  text        NOT NULL,
    granted_at timestamptz NOT NULL
);

CREATE INDEX queue_grant_window_idx ON ledgerflow.queue_grant (queue, partition, granted_at);

CREATE TABLE ledgerflow.queue_slot (
    queue      text        NOT NULL,
    partition  text        NOT NULL,
    run_id     uuid        NOT NULL REFERENCES ledgerflow.workflow_run (id) ON DELETE CASCADE,
    step_name  text        NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    PRIMARY KEY (run_id, step_name, queue),
    FOREIGN KEY (queue, partition) REFERENCES ledgerflow.queue_partition (queue, partition)
);

CREATE TABLE ledgerflow.queue_waiter (
    queue       text        NOT NULL,
    partition   text        NOT NULL,
    run_id      uuid        NOT NULL REFERENCES ledgerflow.workflow_run (id) ON DELETE CASCADE,
    step_name   text        NOT NULL,
    priority    integer     NOT NULL DEFAULT 0,
    enqueued_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    PRIMARY KEY (run_id, step_name, queue),
    FOREIGN KEY (queue, partition) REFERENCES ledgerflow.queue_partition (queue, partition)
);

CREATE INDEX queue_waiter_turn_idx ON ledgerflow.queue_waiter (queue, partition, priority DESC, enqueued_at);

-- A run's priority in the queues it waits in (higher first); set by start().
ALTER TABLE ledgerflow.workflow_run ADD COLUMN priority integer NOT NULL DEFAULT 0;

-- Grants of queue `q`, partition `part`, in the sliding window of `period_ms` ending at `at`.
CREATE FUNCTION ledgerflow.queue_window(q text, part text, period_ms integer, at timestamptz) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT count(*)::int FROM ledgerflow.queue_grant
     WHERE queue = q AND partition = part AND granted_at > at - period_ms * interval '1 millisecond'
$$;

-- When the window of queue `q`, partition `part` next admits a grant: its oldest grant + period.
CREATE FUNCTION ledgerflow.queue_window_opens(q text, part text, period_ms integer, at timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT min(granted_at) + period_ms * interval '1 millisecond' FROM ledgerflow.queue_grant
     WHERE queue = q AND partition = part AND granted_at > at - period_ms * interval '1 millisecond'
$$;

-- The run first in line in queue `q`: the partition in turn (highest waiting priority, then served
-- longest ago), then its waiter by priority and age — the order queue_grant serves them in. Two
-- index lookups (queue_partition_turn_idx, queue_waiter_turn_idx), however long the line.
CREATE FUNCTION ledgerflow.queue_first_in_line(q text) RETURNS uuid LANGUAGE sql STABLE AS $$
    SELECT (SELECT x.run_id FROM ledgerflow.queue_waiter x
             WHERE x.queue = q AND x.partition = p.partition
             ORDER BY x.priority DESC, x.enqueued_at
             LIMIT 1)
      FROM ledgerflow.queue_partition p
     WHERE p.queue = q AND p.partition <> '' AND p.waiting > 0
     ORDER BY p.top_priority DESC, p.last_granted_at NULLS FIRST
     LIMIT 1
$$;

-- Grants free slots of queue `q` to its waiters, best first, until a limit stops it; wakes each
-- waiter it grants. If only a rate limit stops it while waiters remain, the best waiter is woken
-- when the window next admits a grant (it asks again, which grants). Returns the number of grants.
-- The queue's row is read after its counter row is locked, so a pause (which takes that lock) is
-- seen by every grant after it; a paused queue grants nothing and its rate-limit wake-up
-- (next_token_at) is cleared, so no waiter is woken to ask again while it is paused.
CREATE FUNCTION ledgerflow.queue_grant(q text) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    qrow    ledgerflow.queue;
    g       ledgerflow.queue_partition;
    p       ledgerflow.queue_partition;
    w       ledgerflow.queue_waiter;
    at      timestamptz := statement_timestamp();
    gcount  integer;
    granted integer := 0;
    next_token timestamptz;
BEGIN
    SELECT * INTO g FROM ledgerflow.queue_partition WHERE queue = q AND partition = '' FOR UPDATE;
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
CREATE FUNCTION ledgerflow.queue_acquire(q text, part text, run uuid, step text, prio integer)
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

-- Gives back the slots a run holds for `step` (NULL: all of them), and with `waiters` its places
-- in line too, and grants the freed slots to the next waiters.
CREATE FUNCTION ledgerflow.queue_release(run uuid, step text, waiters boolean) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    s record;
    queues text[] := ARRAY[]::text[];
BEGIN
    FOR s IN SELECT DISTINCT queue FROM (
                 SELECT queue FROM ledgerflow.queue_slot WHERE run_id = run AND (step IS NULL OR step_name = step)
                 UNION ALL
                 SELECT queue FROM ledgerflow.queue_waiter WHERE waiters AND run_id = run AND (step IS NULL OR step_name = step)) x
             ORDER BY queue LOOP
        PERFORM 1 FROM ledgerflow.queue_partition WHERE queue = s.queue AND partition = '' FOR UPDATE;
        queues := queues || s.queue;
    END LOOP;
    IF cardinality(queues) = 0 THEN
        RETURN;
    END IF;
    WITH freed AS (
        DELETE FROM ledgerflow.queue_slot WHERE run_id = run AND (step IS NULL OR step_name = step) RETURNING queue, partition
    ), counts AS (
        SELECT queue, partition, count(*)::int AS n FROM freed GROUP BY queue, partition
        UNION ALL
        SELECT queue, '', count(*)::int FROM freed GROUP BY queue
    )
    UPDATE ledgerflow.queue_partition p SET in_flight = greatest(p.in_flight - c.n, 0)
      FROM counts c WHERE p.queue = c.queue AND p.partition = c.partition;
    WITH gone AS (
        DELETE FROM ledgerflow.queue_waiter WHERE waiters AND run_id = run AND (step IS NULL OR step_name = step) RETURNING queue, partition
    )
    UPDATE ledgerflow.queue_partition p
       SET waiting = greatest(p.waiting - g.n, 0),
           top_priority = (SELECT max(x.priority) FROM ledgerflow.queue_waiter x WHERE x.queue = p.queue AND x.partition = p.partition)
      FROM (SELECT queue, partition, count(*)::int AS n FROM gone GROUP BY queue, partition) g
     WHERE p.queue = g.queue AND p.partition = g.partition;
    FOR i IN 1 .. cardinality(queues) LOOP
        PERFORM ledgerflow.queue_grant(queues[i]);
    END LOOP;
END
$$;

-- A step attempt that ends (succeeded, failed, or abandoned — a crashed worker's, when the run is
-- claimed again after its lease) gives back its step's slot; its place in line (if it waits) stays.
CREATE FUNCTION ledgerflow.attempt_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ledgerflow.queue_slot WHERE run_id = NEW.run_id AND step_name = NEW.step_name) THEN
        PERFORM ledgerflow.queue_release(NEW.run_id, NEW.step_name, false);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER step_attempt_ended
    AFTER UPDATE OF status ON ledgerflow.step_attempt
    FOR EACH ROW
    WHEN (OLD.status = 'running' AND NEW.status <> 'running')
    EXECUTE FUNCTION ledgerflow.attempt_ended();

-- A run that settles (completed, failed, cancelled — by anyone) gives back every slot and place
-- in line it has, the whole run's included. A trigger of its own beside run_settled (core 0003).
CREATE FUNCTION ledgerflow.run_settled_queues() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ledgerflow.queue_slot WHERE run_id = NEW.id)
       OR EXISTS (SELECT 1 FROM ledgerflow.queue_waiter WHERE run_id = NEW.id) THEN
        PERFORM ledgerflow.queue_release(NEW.id, NULL, true);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER workflow_run_settled_queues
    AFTER UPDATE OF status ON ledgerflow.workflow_run
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status IN ('completed', 'failed', 'cancelled'))
    EXECUTE FUNCTION ledgerflow.run_settled_queues();
