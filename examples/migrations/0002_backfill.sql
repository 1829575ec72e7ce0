-- The data-backfill example copies legacy.account into billing.account in keyed batches.
CREATE SCHEMA IF NOT EXISTS legacy;
CREATE SCHEMA IF NOT EXISTS billing;

CREATE TABLE legacy.account (
    id            bigint  PRIMARY KEY,
    email         text    NOT NULL,
    balance_euros numeric(12, 2) NOT NULL
);

CREATE TABLE billing.account (
    id            bigint  PRIMARY KEY,
    email         text    NOT NULL,
    balance_cents bigint  NOT NULL
);

-- Rows copied per job: an increment, so a batch applied twice would show up here.
CREATE TABLE billing.backfill_progress (
    job         text    PRIMARY KEY,
    rows_copied bigint  NOT NULL,
    batches     integer NOT NULL
);
