-- ledgerflow core migration 0016: retention of events.
--
-- Until 0016 nothing deleted an event (core 0003): every event sent stayed in ledgerflow.event for
-- good, consumed or not. `ledgerflow prune --events-older-than` now deletes events CONSUMED longer
-- ago than a duration (the step that took one keeps its payload in its result), and, only when
-- asked, `--unconsumed-events-older-than` deletes events that no step took in that long (a late
-- waiter will not find them).
--
-- An event's dedupe key is what makes a redelivered send a no-op; forgetting it would let the same
-- webhook, delivered again after the prune, be stored as a new event and taken by the next
-- waiter. So, as for runs (core 0008), an event pruned with a dedupe key leaves a tombstone in
-- event_archive (name, dedupe key, id, correlation key, a hash of its payload, times; no payload),
-- written in the statement that deletes it, and a send with that name and dedupe key stores
-- nothing and returns the archived event (ledgerflow.pruned_event below) — or is refused, as for a
-- live event, when its correlation key or payload differ. `prune --archive-older-than` deletes
-- tombstones of events sent longer ago than that.
--
-- Races, both closed:
--   * A prune batch locks the events it deletes FOR UPDATE SKIP LOCKED, so it passes over an
--     event a step is taking; a step taking an event that a batch holds waits for the batch and,
--     the row being gone, takes the next one (its `LIMIT 1 FOR UPDATE` counts only rows it
--     locked), never nothing while a newer event is there.
--   * A send with a dedupe key calls ledgerflow.pruned_event before it inserts: FOR KEY SHARE on
--     the live event waits for a prune that holds it, then the archive is read with a new
--     snapshot (a volatile PL/pgSQL function takes one per statement), so the event is either
--     still live (the INSERT's ON CONFLICT finds it) or its tombstone is seen: never neither.
--
-- The archive is append-only like the run archive (core 0012): only the retention path deletes it.

CREATE TABLE ledgerflow.event_archive (
    name             text        NOT NULL,
    dedupe_key       text        NOT NULL,
    id               uuid        NOT NULL,
    correlation_key  text        NOT NULL,
    -- sha256 (hex) of the payload's jsonb text, as run_archive.input_hash.
    payload_hash     text        NOT NULL,
    created_at       timestamptz NOT NULL,
    consumed_by_run  uuid,
    consumed_by_step text,
    consumed_at      timestamptz,
    pruned_at        timestamptz NOT NULL DEFAULT statement_timestamp(),
    PRIMARY KEY (name, dedupe_key)
);

-- `prune --archive-older-than`: the oldest tombstones first.
CREATE INDEX event_archive_created_idx ON ledgerflow.event_archive (created_at, name, dedupe_key);

-- `prune --events-older-than`: consumed events, oldest consumption first.
CREATE INDEX event_consumed_idx ON ledgerflow.event (consumed_at, id) WHERE consumed_at IS NOT NULL;

-- The archived event a send with this name and dedupe key must return instead of storing one;
-- no row when there is none. See the races above.
CREATE FUNCTION ledgerflow.pruned_event(event_name text, key text)
RETURNS TABLE (id uuid, correlation_key text, payload_hash text)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM 1 FROM ledgerflow.event e WHERE e.name = event_name AND e.dedupe_key = key FOR KEY SHARE;
    RETURN QUERY SELECT a.id, a.correlation_key, a.payload_hash
                   FROM ledgerflow.event_archive a WHERE a.name = event_name AND a.dedupe_key = key;
END
$$;

CREATE TRIGGER event_archive_update
    BEFORE UPDATE ON ledgerflow.event_archive
    FOR EACH ROW
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('the event archive is append-only', 'name', 'dedupe_key', 'id');
CREATE TRIGGER event_archive_delete
    BEFORE DELETE ON ledgerflow.event_archive
    FOR EACH ROW
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('the event archive is append-only', 'name', 'dedupe_key', 'id');
CREATE TRIGGER event_archive_truncate
    BEFORE TRUNCATE ON ledgerflow.event_archive
    FOR EACH STATEMENT
    EXECUTE FUNCTION ledgerflow.refuse_rewrite('the event archive is append-only');
