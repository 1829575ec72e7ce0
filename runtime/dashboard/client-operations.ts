import type { AnyWorkflow } from '../../dsl/workflow.js';
import { createClient } from '../client/client.js';
import type { WorkflowRegistration } from '../contracts/registration.js';
import type { Store } from '../store/store.js';
import type { DashboardOperations } from './operations.js';

/** The dashboard's actions and lists, carried out by a ledgerflow client (each action audited by the client). */
export function clientOperations(store: Store, workflows: ReadonlyArray<AnyWorkflow | WorkflowRegistration>): DashboardOperations {
  const client = createClient({ store, workflows });
  return {
    cancel: (runId, note) => client.cancel(runId, note),
    retryRun: (runId, note) => client.retryRun(runId, note),
    resolveEffect: (runId, stepName, resolution, note) => client.resolveEffect(runId, stepName, resolution, note),
    pauseQueue: (name, note) => client.pauseQueue(name, note),
    resumeQueue: (name, note) => client.resumeQueue(name, note),
    pauseSchedule: (name, note) => client.pauseSchedule(name, note),
    resumeSchedule: (name, note) => client.resumeSchedule(name, note),
    listQueues: () => client.listQueues(),
    listSchedules: () => client.listSchedules(),
    listAudit: async (filter) => (await client.listAudit(filter)).map(toAuditEntry),
  };
}
