-- ledgerflow core migration 0023: fencing tokens that a failover cannot hand out twice.
--
-- A fencing token was a counter on the run row, moved on by `fencing_token + 1`. After an
-- asynchronous failover the promoted standby lacks the primary's last commits, and with them the
-- increments they made: a token already handed to a worker on the old primary was handed out
-- again on the new one, and that worker's fenced commits matched the new holder's lease.
--
-- A token is now issued only by ledgerflow.next_fencing_token(token), which returns
-- greatest(token + 1, (T - 1) * 2^32) for the WAL timeline T of the server it runs on.
-- Promotion (and a point-in-time recovery) starts a new, higher timeline; a server that lost
-- commits to a failover is on a timeline above the one they were made on. So a token handed out
-- on timeline T is below T * 2^32 (it starts at or above (T - 1) * 2^32 and is moved on by one at a
-- time: 2^32 claims of one run on one timeline would be needed to reach the next floor), and
-- every token issued on a later timeline is at or above that: none can repeat one of a lost
-- timeline. On timeline 1, the only one a server that never failed over has (and PGlite's), the
-- floor is 0 and tokens are what they were: 1, 2, 3 … Tokens stay below 2^53, exact in a
-- JavaScript number, for the first two million timelines.
--
-- Every fenced comparison (`fencing_token = $token`) is unchanged; only the writes that issue a
-- token changed: the claim (also fused into a completion), a start claimed at insert, the
-- reconciler's take-over, cancels, a deadline's cancel, an operator's retry, and the cascade of
-- run_settled below.
--
-- The timeline is that of WAL insertion: pg_walfile_name(pg_current_wal_lsn()) begins with it in
-- 8 hex digits, and it is the new one from the moment the promoted server accepts writes. Not
-- pg_control_checkpoint(): its timeline is the last checkpoint's, which follows a promotion only
-- once the checkpoint it requests has finished. A server restart keeps the timeline, and needs
-- not change the epoch: with synchronous_commit on (see docs/operations/failover.md) crash
-- recovery replays every acknowledged commit, so no increment is lost.
--
-- Two functions: the timeline, which a test database can replace, and the token. Both are plain
-- SQL, inlined by the planner into the statements that call them (EXPLAIN VERBOSE shows the
-- expression), so executing them costs an expression per token issued, about 0.3 µs. What they
-- cost is at planning: the bodies are parsed at every planning of a statement that calls them,
-- and PostgreSQL plans the prepared claim again at every execution (a custom plan each time).
-- Measured on the claim (one run, server-side, a loaded 2-core machine): planning 0.04-0.08 ms
-- more than with `fencing_token + 1`, on about 1 ms; execution the same within the noise. A
-- PL/pgSQL timeline (not inlined, compiled once per session) planned 0.02-0.05 ms faster but paid
-- its set-up in every transaction; no variant was measurably cheaper in total.

CREATE OR REPLACE FUNCTION ledgerflow.wal_timeline() RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint
$$;

-- The token after `token`: one more, but never below the floor of the server's timeline.
CREATE OR REPLACE FUNCTION ledgerflow.next_fencing_token(token bigint) RETURNS bigint LANGUAGE sql VOLATILE AS $$
    SELECT greatest(token + 1, (ledgerflow.wal_timeline() - 1) * 4294967296)
$$;

-- run_settled (0017) with one change: the cascade's token comes from next_fencing_token.
CREATE OR REPLACE FUNCTION ledgerflow.run_settled() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    woke boolean;
BEGIN
    IF NEW.parent_run_id IS NOT NULL THEN
        UPDATE ledgerflow.workflow_run p
           SET children_open = greatest(p.children_open - 1, 0),
               children_failed = p.children_failed + (CASE WHEN NEW.status = 'completed' THEN 0 ELSE 1 END),
               run_after = CASE
                   WHEN p.status = 'waiting'
                    AND (NEW.status <> 'completed'
                         OR p.children_open - 1 < COALESCE((p.waiting_for->>'wakeBelow')::int, 1))
                   THEN statement_timestamp()
                   ELSE p.run_after END,
               updated_at = statement_timestamp()
         WHERE p.id = NEW.parent_run_id
           AND p.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')
        RETURNING p.status = 'waiting' AND p.run_after = statement_timestamp() INTO woke;
        IF woke THEN
            PERFORM pg_notify('ledgerflow_runs', NEW.parent_run_id::text);
        END IF;
    END IF;
    IF NEW.status IN ('failed', 'cancelled', 'compensated', 'compensation_failed') THEN
        -- A child that is compensating goes on undoing its effects: cancelling it would fence its
        -- compensation out with an effect recorded and never undone.
        UPDATE ledgerflow.workflow_run c
           SET status = 'cancelled', finished_at = statement_timestamp(), updated_at = statement_timestamp(),
               lease_owner = NULL, lease_expires_at = NULL, waiting_for = NULL,
               fencing_token = ledgerflow.next_fencing_token(c.fencing_token),
               error = jsonb_build_object('name', 'Cancelled',
                                          'message', format('its parent run %s %s', NEW.id, NEW.status))
         WHERE c.parent_run_id = NEW.id
           AND c.status NOT IN ('completed', 'failed', 'cancelled', 'compensated', 'compensation_failed')
           AND c.compensation IS NULL;
    END IF;
    IF NEW.status = 'cancelled' THEN
        UPDATE ledgerflow.step_attempt
           SET status = 'abandoned', finished_at = statement_timestamp(),
               error = jsonb_build_object('name', 'Cancelled', 'message', 'the run was cancelled')
         WHERE run_id = NEW.id AND status = 'running';
    END IF;
    RETURN NULL;
END
$$;
