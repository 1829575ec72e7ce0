-- Application tables of the example shop. They live in the same database as ledgerflow's own
-- schema, so a `transactional` step can write them in the commit that records its ledger row.
CREATE SCHEMA IF NOT EXISTS shop;

-- One row per paid order; the unique order_id is a second line of defence, not the mechanism:
-- the ledger already guarantees recordPayment commits once per order.
CREATE TABLE shop.payment (
    id           text        PRIMARY KEY,
    order_id     text        NOT NULL UNIQUE,
    charge_id    text        NOT NULL,
    amount_cents integer     NOT NULL CHECK (amount_cents > 0),
    currency     text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- A running total: an increment, which a retried non-transactional write would double.
CREATE TABLE shop.revenue (
    currency    text    PRIMARY KEY,
    total_cents bigint  NOT NULL,
    payments    integer NOT NULL
);

CREATE TABLE shop.customer (
    id           text        PRIMARY KEY,
    email        text        NOT NULL UNIQUE,
    display_name text        NOT NULL,
    plan         text        NOT NULL CHECK (plan IN ('free', 'pro')),
    created_at   timestamptz NOT NULL DEFAULT now()
);
