/*
 * `ledgerflow/dashboard`: the operator dashboard, as a Hono app to mount in your own server or
 * served on its own (docs/operations/dashboard.md). An entry point of its own, so that an
 * application that runs workflows does not load the dashboard's web stack.
 */
import '../dsl/check-peer-dependencies.js';
export { createDashboard, type DashboardOptions } from './dashboard/dashboard.js';
export {
  serveDashboard,
  DEFAULT_DASHBOARD_HOST,
  DEFAULT_DASHBOARD_PORT,
  type ServeDashboardOptions,
  type ServedDashboard,
} from './dashboard/serve-dashboard.js';
export type { DashboardAuth, DashboardAuthHook, DashboardIdentity } from './dashboard/auth.js';
export type { DashboardOperations } from './dashboard/operations.js';
