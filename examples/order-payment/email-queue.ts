import { queue } from 'ledgerflow/dsl';

/**
 * The email API accepts 50 messages a second for the whole account. The limit is kept in the
 * database, so it holds across every worker process and machine, counted on database time: a
 * step behind this queue waits (`waiting`, no lease held) until a grant admits its attempt.
 */
export const emailQueue = queue('email', { rateLimit: { limit: 50, periodMs: 1_000 } });
