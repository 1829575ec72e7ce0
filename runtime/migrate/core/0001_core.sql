-- ledgerflow core migration 0001: the core schema.
-- Ships inside the ledgerflow package; `ledgerflow migrate` applies it before any project migration and
-- records it as core/0001_core.sql. Append-only: once released, this file never changes (its checksum
-- is recorded in every database); change the core schema in a new runtime/migrate/core/NNNN_name.sql.
--
-- The core schema: the three records (DESIGN.md) plus the step definitions that let the
-- database itself refuse a completed effect step without a recorded ledger row.
--
-- Run status machine (workflow_run.status):
--   pending  --claim-->  running          (lease_owner/lease_expires_at set, fencing_token + 1)
--   running  --step committed, more steps-->  running (same lease) or pending (released)
--   running  --retryable failure-->  pending   (run_after = db now() + backoff)
--   running  --last step committed-->  completed
--   running  --attempts exhausted / non-retryable / conflict-->  failed
--   running  --intent cannot be resolved-->  needs_reconciliation
--   running/pending  --lease expired-->  claimable again (the claim bumps fencing_token)
--   pending/running/needs_reconciliation  --cancel-->  cancelled
-- completed, failed and cancelled are final.
--
-- Ledger status machine (step_effect.status):
--   intent   --result commit-->  recorded  (final; referenced by step_result, cannot change)
--   intent   --reconcile: not found-->  released
--   released --a new attempt re-claims the same key-->  intent

CREATE SCHEMA IF NOT EXISTS ledgerflow;

CREATE TABLE ledgerflow.workflow_version (
    workflow_name   text        NOT NULL,
    version         integer     NOT NULL CHECK (version >= 1),
    definition_hash text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow_name, version)
);

CREATE TABLE ledgerflow.workflow_step_def (
    workflow_name     text    NOT NULL,
    version           integer NOT NULL,
    step_name         text    NOT NULL,
    position          integer NOT NULL CHECK (position >= 0),
    kind              text    NOT NULL CHECK (kind IN ('step', 'transactional', 'external')),
    idempotent_by_key boolean NOT NULL DEFAULT false,
    PRIMARY KEY (workflow_name, version, step_name),
    UNIQUE (workflow_name, version, position),
    UNIQUE (workflow_name, version, step_name, kind),
    FOREIGN KEY (workflow_name, version) REFERENCES ledgerflow.workflow_version (workflow_name, version),
    CHECK (NOT idempotent_by_key OR kind = 'external')
);

CREATE TABLE ledgerflow.workflow_run (
    id               uuid        PRIMARY KEY,
    workflow_name    text        NOT NULL,
    workflow_version integer     NOT NULL,
    status           text        NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled', 'needs_reconciliation')),
    input            jsonb       NOT NULL,
    dedupe_key       text,
    current_step     integer     NOT NULL DEFAULT 0 CHECK (current_step >= 0),
    output           jsonb,
    error            jsonb,
    run_after        timestamptz NOT NULL DEFAULT now(),
    lease_owner      text,
    lease_expires_at timestamptz,
    fencing_token    bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    FOREIGN KEY (workflow_name, workflow_version) REFERENCES ledgerflow.workflow_version (workflow_name, version),
    UNIQUE (workflow_name, dedupe_key),
    CHECK ((status = 'running') = (lease_owner IS NOT NULL)),
    CHECK ((status IN ('completed', 'failed', 'cancelled')) = (finished_at IS NOT NULL))
);

CREATE INDEX workflow_run_pending_idx ON ledgerflow.workflow_run (run_after) WHERE status = 'pending';
CREATE INDEX workflow_run_leased_idx ON ledgerflow.workflow_run (lease_expires_at) WHERE status = 'running';
CREATE INDEX workflow_run_status_idx ON ledgerflow.workflow_run (status, created_at);

CREATE TABLE ledgerflow.step_attempt (
    run_id           uuid        NOT NULL REFERENCES ledgerflow.workflow_run (id) ON DELETE CASCADE,
    step_name        text        NOT NULL,
    attempt          integer     NOT NULL CHECK (attempt >= 1),
    status           text        NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'abandoned')),
    fencing_token    bigint      NOT NULL,
    worker_id        text        NOT NULL,
    error            jsonb,
    started_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    next_eligible_at timestamptz,
    PRIMARY KEY (run_id, step_name, attempt),
    CHECK ((status = 'running') = (finished_at IS NULL))
);

-- The effect ledger. Columns may be added; this primary key may not change.
CREATE TABLE ledgerflow.step_effect (
    workflow_id     uuid        NOT NULL REFERENCES ledgerflow.workflow_run (id) ON DELETE CASCADE,
    step_name       text        NOT NULL,
    idempotency_key text        NOT NULL,
    effect          jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    status          text        NOT NULL CHECK (status IN ('intent', 'recorded', 'released')),
    kind            text        NOT NULL CHECK (kind IN ('transactional', 'external')),
    request_hash    text        NOT NULL,
    attempt         integer     NOT NULL CHECK (attempt >= 1),
    fencing_token   bigint      NOT NULL,
    intent_at       timestamptz NOT NULL DEFAULT now(),
    recorded_at     timestamptz,
    resolution      text,
    PRIMARY KEY (workflow_id, step_name, idempotency_key),
    UNIQUE (workflow_id, step_name, idempotency_key, status),
    CHECK ((status = 'recorded') = (recorded_at IS NOT NULL))
);

CREATE INDEX step_effect_open_intent_idx ON ledgerflow.step_effect (intent_at) WHERE status = 'intent';

-- A step's checkpointed output. For effect kinds the row must point at a *recorded* ledger
-- row (composite foreign key, MATCH SIMPLE: plain steps carry NULLs and are not checked),
-- and its kind must be the one the workflow version declared.
CREATE TABLE ledgerflow.step_result (
    run_id           uuid        NOT NULL REFERENCES ledgerflow.workflow_run (id) ON DELETE CASCADE,
    workflow_name    text        NOT NULL,
    workflow_version integer     NOT NULL,
    step_name        text        NOT NULL,
    kind             text        NOT NULL,
    output           jsonb       NOT NULL,
    attempt          integer     NOT NULL CHECK (attempt >= 1),
    idempotency_key  text,
    effect_status    text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step_name),
    FOREIGN KEY (workflow_name, workflow_version, step_name, kind)
        REFERENCES ledgerflow.workflow_step_def (workflow_name, version, step_name, kind),
    FOREIGN KEY (run_id, step_name, idempotency_key, effect_status)
        REFERENCES ledgerflow.step_effect (workflow_id, step_name, idempotency_key, status),
    CHECK (
        (kind = 'step' AND idempotency_key IS NULL AND effect_status IS NULL)
        OR (kind IN ('transactional', 'external') AND idempotency_key IS NOT NULL AND effect_status = 'recorded')
    )
);
