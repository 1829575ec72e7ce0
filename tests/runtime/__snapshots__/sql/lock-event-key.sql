-- lockEventKeyStatement: serializes waiters and senders of one event name and key
--
-- $1 = "ledgerflow.event:payment.settled"
-- $2 = "order-42"

SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || $2, 0));
