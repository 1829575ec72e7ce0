-- ledgerflow core migration 0007: operator actions — retry a failed or cancelled run, resolve an
-- open intent by hand, pause a queue — each written to an audit table in the same transaction.
--
-- workflow_run.budget_step / budget_base
--   An operator's retry gives the step the run stopped at a fresh attempt budget. Attempts are
--   history (their numbers keep growing), so the budget is counted from a base: the attempts of
--   `budget_step` numbered <= `budget_base` were made before the retry and count toward neither
--   maxAttempts nor the crash limit. Every statement that counts a step's failed or crashed
--   attempts reads them (claim, failure commit, reconciler claim). NULL / 0: nothing excluded.
--   Only the step the run stopped at has attempts before a retry (later steps never ran), so one
--   step per run is enough; a later retry at another step replaces it.

ALTER TABLE ledgerflow.workflow_run
    ADD COLUMN budget_step text,
    ADD COLUMN budget_base integer NOT NULL DEFAULT 0 CHECK (budget_base >= 0);

-- A paused queue grants no slot: its waiters stay in line, runs holding slots keep them until they
-- give them back. Workers registering the queue never touch it (registerQueueStatement).
ALTER TABLE ledgerflow.queue ADD COLUMN paused boolean NOT NULL DEFAULT false;

-- Who did what, when and why: one row per operator action that changed something, written by the
-- action's own transaction (an action that is refused, or changes nothing, writes none).
--   action   cancel | retry | resolve-found | resolve-not-found | pause-queue | resume-queue
--            | pause-schedule | resume-schedule
--   run_id   the run acted on (no foreign key: the trail outlives a deleted run)
--   target   what else was acted on: the effect's idempotency key, the queue, the schedule
--   detail   what the action found and did (previous status, recorded output, …)
CREATE TABLE ledgerflow.operator_action (
    id      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT statement_timestamp(),
    actor   text        NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
    action  text        NOT NULL CHECK (action IN ('cancel', 'retry', 'resolve-found', 'resolve-not-found', 'pause-queue',
                                                   'resume-queue', 'pause-schedule', 'resume-schedule')),
    run_id  uuid,
    target  text,
    reason  text        NOT NULL CHECK (length(reason) BETWEEN 1 AND 2000),
    detail  jsonb       NOT NULL DEFAULT '{}'::jsonb
);

CREATE INDEX operator_action_run_idx ON ledgerflow.operator_action (run_id, id) WHERE run_id IS NOT NULL;

-- queue_grant as in core 0004, with two changes: the queue's row is read after its counter row is
-- locked (so a pause, which takes that lock, is seen by every grant that follows it), and a paused
-- queue grants nothing — its rate-limit wake-up (next_token_at) is cleared too, so no waiter is
-- woken to ask again while it is paused. A resume calls it, granting at once what the limits allow.
CREATE OR REPLACE FUNCTION ledgerflow.queue_grant(q text) RETURNS integer LANGUAGE plpgsql AS $$
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
