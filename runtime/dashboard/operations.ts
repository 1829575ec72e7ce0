import type { Client } from '../client/client.js';

/**
 * What the dashboard asks of ledgerflow to act and to list: the client's operator API. Each
 * action writes its change and its audit row (actor, reason) in one transaction; the dashboard
 * checks the request (CSRF, origin, a reason), checks a found output against the step's schema to
 * say what is wrong in the page, and shows the outcome. `createDashboard` uses a client over its
 * store unless given another implementation.
 */
export type DashboardOperations = Pick<
  Client,
  | 'cancel'
  | 'retryRun'
  | 'resolveEffect'
  | 'pauseQueue'
  | 'resumeQueue'
  | 'pauseSchedule'
  | 'resumeSchedule'
  | 'listQueues'
  | 'listSchedules'
  | 'listAudit'
>;
