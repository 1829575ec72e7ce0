-- Orders the shop cancelled (the customer withdrew them) while their payment may be under way.
-- order-payment's recordPayment refuses a cancelled order, and the run's compensation refunds
-- the charge it already made.
CREATE TABLE shop.order_cancellation (
    order_id     text        PRIMARY KEY,
    reason       text        NOT NULL,
    cancelled_at timestamptz NOT NULL DEFAULT now()
);
