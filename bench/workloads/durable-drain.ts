import type { AnyWorkflow } from '../../dsl/index.js';
import { createPgStore } from '../../runtime/store/pg/pg-store.js';
import { prepareBenchDatabase as prepareDatabase } from '../bench-database.js';
import type { BenchServer } from '../environment.js';
import { createInstrumentedPgStore, type DriverCounts } from '../instrumented-pg-store.js';
import type { ThroughputRow } from '../results-model.js';
import { readServerCounters, type ServerCounters } from '../server-stats.js';
import type { benchRegistrations } from './bench-workflows.js';
import { measureDrain } from './drain.js';

export interface DurableDrain {
  readonly row: ThroughputRow;
  readonly counts: DriverCounts;
  readonly server: ServerCounters;
}

/**
 * One drain of the full bench on a fresh database: the backlog enqueued, then drained by a worker
 * on the instrumented store (round trips and query classes counted), with the server's commit and
 * rollback deltas of the drain alone. Failed step attempts and worker errors go to `notes`.
 */
export async function durableDrain(
  server: BenchServer,
  o: {
    readonly label: string;
    readonly workflow: AnyWorkflow;
    readonly runs: number;
    readonly stepsPerRun: number;
    readonly concurrency: number;
    readonly registrations: ReturnType<typeof benchRegistrations>;
    readonly notes: string[];
  },
): Promise<DurableDrain> {
  const database = `bench_${o.workflow.name.replaceAll('-', '_')}_c${o.concurrency}`;
  const { url } = await prepareDatabase(server, database);
  const enqueueStore = createPgStore({ connectionString: url, maxConnections: 16 });
  const workerStore = createInstrumentedPgStore({
    connectionString: url,
    maxConnections: o.concurrency + 2,
    applicationName: 'ledgerflow-bench-worker',
  });
  let before: ServerCounters = { commits: 0, rollbacks: 0 };
  try {
    const m = await measureDrain({
      workflow: o.workflow,
      registrations: o.registrations,
      runs: o.runs,
      concurrency: o.concurrency,
      enqueueStore,
      workerStore,
      beforeDrain: async () => {
        await enqueueStore.close();
        before = await readServerCounters(server.adminUrl, database);
        workerStore.reset();
      },
    });
    await workerStore.close();
    const after = await readServerCounters(server.adminUrl, database);
    const steps = o.runs * o.stepsPerRun;
    const delta = { commits: after.commits - before.commits, rollbacks: after.rollbacks - before.rollbacks };
    if (m.failedSteps > 0 || m.errors.length > 0) {
      o.notes.push(
        `${o.label} at concurrency ${o.concurrency}: ${m.failedSteps} failed step attempt(s); ${m.errors.join('; ')}`,
      );
    }
    return {
      row: {
        workload: o.label,
        concurrency: o.concurrency,
        steps,
        workflows: o.runs,
        seconds: m.seconds,
        stepsPerSecond: steps / m.seconds,
        workflowsPerSecond: o.runs / m.seconds,
        commitsPerStep: delta.commits / steps,
        roundTripsPerStep: workerStore.counts.roundTrips / steps,
        workerCpuMsPerStep: m.cpuMs / steps,
        rollbacks: delta.rollbacks,
      },
      counts: { ...workerStore.counts },
      server: delta,
    };
  } finally {
    await workerStore.close().catch(() => {});
    await enqueueStore.close().catch(() => {});
  }
}
