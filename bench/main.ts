import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { FakePaymentProvider } from '../examples/fakes/payment-provider.js';
import type { AnyWorkflow } from '../dsl/index.js';
import type { Store } from '../runtime/index.js';
import { createPgStore } from '../runtime/store/pg/pg-store.js';
import { createPGliteStore } from '../runtime/store/pglite/pglite-store.js';
import { migrateForTest } from '../tests/support/migrate-for-test.js';
import { describeWatchBench, runCodegenBench, runCodegenWatchBench } from './codegen-bench.js';
import { prepareBenchDatabase as prepareDatabase } from './bench-database.js';
import { describeEnvironment, openBenchServer, type BenchServer } from './environment.js';
import { renderChartPng, renderChartSvg, type ChartSeries } from './report/chart.js';
import { renderMarkdown } from './report/markdown.js';
import type { BenchResults, EndToEndRow, StepCostRow, ThroughputRow } from './results-model.js';
import {
  BENCH_APP_SQL,
  BENCH_WORKFLOWS,
  benchRegistrations,
  externalOnly,
  oneStep,
  plainOnly,
  threeStep,
} from './workloads/bench-workflows.js';
import { measureDrain } from './workloads/drain.js';
import { durableDrain } from './workloads/durable-drain.js';
import { measureThroughputRounds } from './throughput-rounds.js';
import { END_TO_END_WORKLOADS, ledgerflowEndToEnd } from './workloads/end-to-end.js';
import { endToEndTable } from './report/end-to-end.js';
import { measureLatency } from './workloads/w3-latency.js';
import {
  measureFanOut,
  measureSleepingClaimCost,
  WAIT_BENCH_WORKFLOWS,
  waitBenchRegistrations,
} from './workloads/waits.js';
import {
  measureQueuedBacklog,
  QUEUE_BENCH_WORKFLOWS,
  queueBenchRegistrations,
  queuedOneStep,
} from './workloads/queues.js';
import { measureTelemetryOverhead, type TelemetryOverhead } from './workloads/telemetry.js';
import { measureWorkerCpu, workerCpuTable, type WorkerCpuRow } from './workloads/worker-cpu.js';
import { measureScale } from './workloads/scale.js';

/**
 * `npm run bench`: every workload in one run against one durable server, then a Markdown
 * table and a chart in bench/results/. Never part of `npm test`.
 *
 *   LEDGERFLOW_BENCH_N            steps per throughput measurement (default 2000)
 *   LEDGERFLOW_BENCH_ROUNDS       rounds of the W0/W1/W2 throughput table, median reported (default 3)
 *   LEDGERFLOW_BENCH_W3_SECONDS   length of the open-loop latency run (default 5)
 *   LEDGERFLOW_BENCH_CODEGEN=0    skip the codegen benchmark
 *   LEDGERFLOW_BENCH_SLEEPING     sleeping runs for the claim-cost measurement (default 100000)
 *   LEDGERFLOW_BENCH_FANOUT       children of the fan-out measurement (default 10000)
 *   LEDGERFLOW_BENCH_TELEMETRY_ROUNDS  rounds of the telemetry overhead measurement (default 2)
 *   LEDGERFLOW_BENCH_ONLY=telemetry    only the telemetry overhead measurement, logged, no files written
 *   LEDGERFLOW_BENCH_ONLY=fanout       only the fan-out measurement, logged, no files written
 *   LEDGERFLOW_BENCH_ONLY=latency      only W3 (after its path's closed-loop peak: 16 clients starting one-step runs
 *                                      without the worker), logged, no files written
 *   LEDGERFLOW_BENCH_W3_RATE      with =latency: arrivals per second instead of half that peak
 *   LEDGERFLOW_BENCH_ONLY=e2e          only the end-to-end workloads, their table printed, no files written
 *   LEDGERFLOW_BENCH_ONLY=wait         only the wait's cost: one step, closed loop with startAndWait vs the worker's
 *                                      run-completed event, c = 1, 4, 16, rounds alternated in one run, table printed
 *   LEDGERFLOW_BENCH_WAIT_ROUNDS  rounds per mode and concurrency of =wait (default 3)
 *   LEDGERFLOW_BENCH_ONLY=cpu          only worker CPU per step (W1, W2 on the plain store), its table printed, no files written
 *   LEDGERFLOW_BENCH_E2E_N        timed workflows per end-to-end measurement (default 500)
 *   LEDGERFLOW_BENCH_ONLY=queue        only a step behind a queue whose limit is never reached against the same step
 *                                      unqueued (W1), c = 4 and 16, rounds alternated in one run, table printed
 *   LEDGERFLOW_BENCH_QUEUE_ROUNDS rounds per workload and concurrency of =queue (default 2)
 *   LEDGERFLOW_BENCH_ONLY=scale        only the scale lines (claim latency over 1 000 … 1 000 000 runs, 1 vs 4 worker processes), logged
 *   LEDGERFLOW_BENCH_SCALE_MAX    largest backlog of the claim-latency line (default 1000000)
 *   DATABASE_URL                  use this server instead of starting one (settings recorded as found)
 */
const CONCURRENCIES = [1, 4, 16] as const;

function logFanOut(fanOut: Awaited<ReturnType<typeof measureFanOut>>): void {
  log(
    `fan-out: ${fanOut.children} children at ${fanOut.forEachChildrenPerSecond.toFixed(0)}/s ` +
      `(client.start loop ${fanOut.clientStartsPerSecond.toFixed(0)}/s, bulk insert ${fanOut.bulkInsertRowsPerSecond.toFixed(0)} rows/s)`,
  );
}

async function main(): Promise<void> {
  const n = positiveInt('LEDGERFLOW_BENCH_N', 2000);
  const only = process.env['LEDGERFLOW_BENCH_ONLY'] ?? '';
  if (!['', 'telemetry', 'fanout', 'latency', 'e2e', 'wait', 'queue', 'cpu', 'scale'].includes(only)) {
    throw new Error(
      `LEDGERFLOW_BENCH_ONLY must be telemetry, fanout, latency, e2e, wait, queue, cpu, scale or empty (got "${only}").`,
    );
  }
  const w3Seconds = positiveInt('LEDGERFLOW_BENCH_W3_SECONDS', 5);
  const started = performance.now();
  const server = await openBenchServer();
  const notes: string[] = [];
  const payments = new FakePaymentProvider();
  const registrations = benchRegistrations(payments);
  try {
    const environment = await describeEnvironment(server);
    log(
      `server: ${environment.serverVersion}, fsync=${environment.fsync}, synchronous_commit=${environment.synchronousCommit}`,
    );
    if (only === 'telemetry') {
      await telemetryOverhead(server, registrations, n);
      return;
    }
    if (only === 'cpu') {
      process.stdout.write(`${workerCpuTable(await workerCpu(server, registrations, n))}\n`);
      return;
    }
    if (only === 'e2e') {
      process.stdout.write(`${endToEndTable(await endToEnd(server, registrations))}\n`);
      return;
    }
    if (only === 'wait') {
      process.stdout.write(`${await waitVersusEvent(server, registrations)}\n`);
      return;
    }
    if (only === 'queue') {
      process.stdout.write(`${await queuedVersusPlain(server, registrations, n)}\n`);
      return;
    }
    if (only === 'scale') {
      await measureScale(server, {
        runs: n,
        maxBacklog: positiveInt('LEDGERFLOW_BENCH_SCALE_MAX', 1_000_000),
        registrations,
        log,
      });
      return;
    }
    if (only === 'fanout') {
      const url = await server.freshDatabase('bench_fanout');
      await withStores([createPgStore({ connectionString: url, maxConnections: 24 })], async ([store]) => {
        await migrateForTest(store, [...BENCH_WORKFLOWS, ...WAIT_BENCH_WORKFLOWS]);
        await sql.raw(BENCH_APP_SQL).execute(store.db);
        logFanOut(
          await measureFanOut(store, {
            children: positiveInt('LEDGERFLOW_BENCH_FANOUT', 10_000),
            clientStarts: Math.min(n, 1000),
            registrations: [...registrations, ...waitBenchRegistrations()],
          }),
        );
      });
      return;
    }
    if (only === 'latency') {
      const rate =
        process.env['LEDGERFLOW_BENCH_W3_RATE'] === undefined
          ? (await w3PathPeak(server, registrations)) / 2
          : positiveInt('LEDGERFLOW_BENCH_W3_RATE', 1);
      await measureW3(server, rate, w3Seconds, registrations);
      return;
    }

    const { floor, floorAsTransaction, durable } = await measureThroughputRounds(server, {
      n,
      rounds: positiveInt('LEDGERFLOW_BENCH_ROUNDS', 3),
      concurrencies: CONCURRENCIES,
      registrations,
      notes,
      log,
    });
    const drain = async (
      label: string,
      workflow: AnyWorkflow,
      runs: number,
      stepsPerRun: number,
      concurrency: number,
    ) => {
      const m = await durableDrain(server, { workflow, runs, stepsPerRun, concurrency, registrations, notes, label });
      log(
        `${label} c=${concurrency}: ${m.row.stepsPerSecond.toFixed(0)} steps/s, ${m.row.commitsPerStep?.toFixed(2)} commits/step`,
      );
      return m;
    };

    const workerCpuRows = await workerCpu(server, registrations, n);

    const endToEndRows = await endToEnd(server, registrations);

    const telemetry = await telemetryOverhead(server, registrations, n);

    const queueRegistrations = [...registrations, ...queueBenchRegistrations()];
    const queuedRow = (
      await durableDrain(server, {
        workflow: queuedOneStep,
        runs: n,
        stepsPerRun: 1,
        concurrency: 16,
        registrations: queueRegistrations,
        notes,
        label: 'W1 through a queue (limit never reached)',
      })
    ).row;
    const w1At16 = durable.find((r) => r.workload.startsWith('W1') && r.concurrency === 16)!;
    log(
      `W1 through a queue c=16: ${queuedRow.stepsPerSecond.toFixed(0)} steps/s (${(queuedRow.stepsPerSecond / w1At16.stepsPerSecond).toFixed(2)} × W1)`,
    );

    const stepCosts: StepCostRow[] = [];
    const costRuns = Math.min(n, 500);
    for (const [kind, workflow] of [
      ['step', plainOnly],
      ['transactional', oneStep],
      ['external', externalOnly],
    ] as const) {
      const m = await drain(`cost of ${kind}`, workflow, costRuns, 1, 1);
      stepCosts.push({
        kind,
        runs: costRuns,
        stepCommitsPerStep: m.counts.stepCommits / costRuns,
        claimCommitsPerRun: m.counts.claimCommits / costRuns,
        otherCommitsPerRun: m.counts.otherCommits / costRuns,
        serverCommitsPerRun: m.server.commits / costRuns,
        roundTripsPerRun: m.counts.roundTrips / costRuns,
        wallMsPerRun: (m.row.seconds * 1000) / costRuns,
        queryMsPerRun: Object.fromEntries(
          Object.entries(m.counts.latencyMs).map(([queryClass, { ms }]) => [queryClass, ms / costRuns]),
        ) as StepCostRow['queryMsPerRun'],
      });
    }

    // W3 arrives at half the closed-loop peak of its own path (starts included): one-step runs
    // started by a client without the worker, 16 at a time. Half the drain peak would ask for more
    // starts than the machine does, and so would half the end-to-end rows above, whose starts run
    // the workflow in the starting process in one commit: either measures a queue that only grows.
    const w3Peak = await w3PathPeak(server, registrations);
    const latency = { ...(await measureW3(server, w3Peak / 2, w3Seconds, registrations)), peakPerSecond: w3Peak };

    const pglite: ThroughputRow[] = [];
    const pgliteRuns = Math.min(n, 1000);
    for (const concurrency of CONCURRENCIES) {
      const store = await createPGliteStore();
      try {
        await migrateForTest(store, BENCH_WORKFLOWS);
        await sql.raw(BENCH_APP_SQL).execute(store.db);
        const m = await measureDrain({
          workflow: oneStep,
          registrations,
          runs: pgliteRuns,
          concurrency,
          enqueueStore: store,
          workerStore: store,
        });
        pglite.push({
          workload: 'W1 one-step drain (PGlite, fsync off)',
          concurrency,
          steps: pgliteRuns,
          workflows: pgliteRuns,
          seconds: m.seconds,
          stepsPerSecond: pgliteRuns / m.seconds,
          workerCpuMsPerStep: m.cpuMs / pgliteRuns,
        });
        log(`PGlite W1 c=${concurrency}: ${(pgliteRuns / m.seconds).toFixed(0)} steps/s`);
      } finally {
        await store.close();
      }
    }

    const waitsUrl = await server.freshDatabase('bench_waits');
    const waits = await withStores(
      [createPgStore({ connectionString: waitsUrl, maxConnections: 24 })],
      async ([store]) => {
        await migrateForTest(store, [...BENCH_WORKFLOWS, ...WAIT_BENCH_WORKFLOWS]);
        await sql.raw(BENCH_APP_SQL).execute(store.db);
        const waitRegistrations = [...registrations, ...waitBenchRegistrations()];
        const sleeping = await measureSleepingClaimCost(store, {
          sleeping: positiveInt('LEDGERFLOW_BENCH_SLEEPING', 100_000),
          drainRuns: Math.min(n, 1000),
          drainWorkflow: plainOnly,
          registrations: waitRegistrations,
        });
        log(
          `sleeping runs: ${sleeping.sleeping}; empty claim ${sleeping.emptyClaimMs.without.toFixed(2)} → ${sleeping.emptyClaimMs.with.toFixed(2)} ` +
            `(vacuumed ${sleeping.emptyClaimMs.vacuumed.toFixed(2)}) ms, drain ${sleeping.drainRunsPerSecond.without.toFixed(0)} → ` +
            `${sleeping.drainRunsPerSecond.with.toFixed(0)} (vacuumed ${sleeping.drainRunsPerSecond.vacuumed.toFixed(0)}) runs/s`,
        );
        const fanOut = await measureFanOut(store, {
          children: positiveInt('LEDGERFLOW_BENCH_FANOUT', 10_000),
          clientStarts: Math.min(n, 1000),
          registrations: waitRegistrations,
        });
        logFanOut(fanOut);
        return { sleeping, fanOut };
      },
    );

    const queuesUrl = await server.freshDatabase('bench_queues');
    const backlog = await withStores(
      [createPgStore({ connectionString: queuesUrl, maxConnections: 4 })],
      async ([store]) => {
        await migrateForTest(store, [...BENCH_WORKFLOWS, ...QUEUE_BENCH_WORKFLOWS]);
        return measureQueuedBacklog(store, { queued: 100_000, partitions: 1_000, registrations: queueRegistrations });
      },
    );
    log(
      `queued backlog ${backlog.queued} across ${backlog.partitions} partitions: empty claim ${backlog.emptyClaimMs.without.toFixed(2)} → ` +
        `${backlog.emptyClaimMs.with.toFixed(2)} ms, one grant ${backlog.grantMs.toFixed(2)} ms`,
    );

    let codegen: BenchResults['codegen'];
    if (process.env['LEDGERFLOW_BENCH_CODEGEN'] !== '0') {
      codegen = { ...(await runCodegenBench()), watch: await runCodegenWatchBench() };
      log(`codegen: ${codegen.files} files in ${codegen.codegenMs} ms (tsc ${codegen.tscMs} ms)`);
      log(describeWatchBench(codegen.watch!));
    }

    writeResults({
      environment,
      concurrencies: CONCURRENCIES,
      stepsPerMeasurement:
        `Each W0/W1 measurement completes ${n} steps, W2 ${Math.ceil(n / 3)} workflows (LEDGERFLOW_BENCH_N); ` +
        'the worker, the load and the server share this machine.',
      totalSeconds: (performance.now() - started) / 1000,
      floor,
      floorAsTransaction,
      durable,
      workerCpu: workerCpuRows,
      endToEnd: endToEndRows,
      stepCosts,
      latency,
      pglite,
      waits,
      queues: { queued: queuedRow, w1: w1At16, backlog },
      telemetry,
      ...(codegen ? { codegen } : {}),
      notes,
    });
  } finally {
    await server.close();
  }
}

/** The closed-loop peak (workflows/s) of W3's path: 16 clients start one-step runs without the worker and wait. */
async function w3PathPeak(server: BenchServer, registrations: ReturnType<typeof benchRegistrations>): Promise<number> {
  const row = await ledgerflowEndToEnd(server, {
    workload: END_TO_END_WORKLOADS.find((w) => w.id === 'one-step')!,
    clients: 16,
    runs: positiveInt('LEDGERFLOW_BENCH_E2E_N', 500),
    warmUp: 20,
    registrations,
    completion: 'remoteStartAndWait',
  });
  log(`end-to-end one-step c=16, started without the worker: ${row.workflowsPerSecond.toFixed(0)} workflows/s`);
  return row.workflowsPerSecond;
}

/** W3 at `arrivalsPerSecond` (half the closed-loop peak of its path in the full bench), logged. */
async function measureW3(
  server: BenchServer,
  arrivalsPerSecond: number,
  seconds: number,
  registrations: ReturnType<typeof benchRegistrations>,
) {
  const latencyDb = await prepareDatabase(server, 'bench_w3');
  const latency = await withStores(
    [
      createPgStore({ connectionString: latencyDb.url, maxConnections: 8 }),
      createPgStore({ connectionString: latencyDb.url, maxConnections: 18 }),
    ],
    ([clientStore, workerStore]) =>
      measureLatency({ arrivalsPerSecond, seconds, concurrency: 16, clientStore, workerStore, registrations }),
  );
  const r = latency.toResult!;
  log(
    `W3 at ${arrivalsPerSecond.toFixed(0)} runs/s: start→first step p50 ${latency.p50Ms.toFixed(1)} ms, p99 ${latency.p99Ms.toFixed(1)} ms; ` +
      `start→result (startAndWait) p50 ${r.p50Ms.toFixed(1)} ms, p99 ${r.p99Ms.toFixed(1)} ms`,
  );
  return latency;
}

/** Worker CPU per step of W1 and W2 at every concurrency, on the plain store (bench/workloads/worker-cpu.ts). */
async function workerCpu(
  server: BenchServer,
  registrations: ReturnType<typeof benchRegistrations>,
  n: number,
): Promise<WorkerCpuRow[]> {
  const rows: WorkerCpuRow[] = [];
  for (const [workload, workflow, stepsPerRun] of [
    ['W1 one-step drain', oneStep, 1],
    ['W2 three-step drain', threeStep, 3],
  ] as const) {
    for (const concurrency of CONCURRENCIES) {
      const { url } = await prepareDatabase(server, `bench_cpu_${workflow.name.replaceAll('-', '_')}_c${concurrency}`);
      const runs = Math.ceil(n / stepsPerRun);
      const row = await withStores(
        [
          createPgStore({ connectionString: url, maxConnections: 16 }),
          createPgStore({ connectionString: url, maxConnections: concurrency + 2 }),
        ],
        ([enqueueStore, workerStore]) =>
          measureWorkerCpu({
            workload,
            workflow,
            stepsPerRun,
            registrations,
            runs,
            warmUpRuns: Math.min(200, runs),
            concurrency,
            enqueueStore,
            workerStore,
          }),
      );
      log(`worker CPU ${workload} c=${concurrency}: ${row.cpuMsPerStep.toFixed(3)} ms/step`);
      rows.push(row);
    }
  }
  return rows;
}

/** The end-to-end workloads (bench/workloads/end-to-end.ts) at every concurrency. */
async function endToEnd(
  server: BenchServer,
  registrations: ReturnType<typeof benchRegistrations>,
): Promise<EndToEndRow[]> {
  const runs = positiveInt('LEDGERFLOW_BENCH_E2E_N', 500);
  const rows: EndToEndRow[] = [];
  for (const workload of END_TO_END_WORKLOADS) {
    for (const clients of CONCURRENCIES) {
      const row = await ledgerflowEndToEnd(server, { workload, clients, runs, warmUp: 20, registrations });
      log(
        `end-to-end ${workload.id} c=${clients}: ${row.workflowsPerSecond.toFixed(0)} workflows/s, ${row.commitsPerWorkflow.toFixed(2)} commits, ${row.walSyncsPerWorkflow.toFixed(2)} WAL syncs per workflow`,
      );
      rows.push(row);
    }
  }
  return rows;
}

/**
 * What waiting costs: the one-step end-to-end workload with each client waiting through
 * `startAndWait` (closed loop, as applications wait), through `start` and then `waitForRun`, and
 * through the worker's `run-completed` event (no wait of the client's own), in rotating rounds
 * of the same run at c = 1, 4, 16. Each mode's rate is its runs over its seconds summed over the
 * rounds.
 */
async function waitVersusEvent(
  server: BenchServer,
  registrations: ReturnType<typeof benchRegistrations>,
): Promise<string> {
  const runs = positiveInt('LEDGERFLOW_BENCH_E2E_N', 500);
  const rounds = positiveInt('LEDGERFLOW_BENCH_WAIT_ROUNDS', 3);
  const workload = END_TO_END_WORKLOADS.find((w) => w.id === 'one-step')!;
  const modes = ['event', 'startAndWait', 'startThenWait'] as const;
  const lines = [
    '| clients | event: workflows/s (run-completed in-process) | startAndWait: workflows/s | start, then waitForRun: workflows/s | startAndWait / event | start, then waitForRun / event | commits / workflow event, startAndWait, start then waitForRun |',
    '|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const clients of CONCURRENCIES) {
    const total = Object.fromEntries(modes.map((m) => [m, { runs: 0, seconds: 0, commits: 0 }])) as Record<
      (typeof modes)[number],
      { runs: number; seconds: number; commits: number }
    >;
    for (let round = 0; round < rounds; round++) {
      const order = [...modes.slice(round % modes.length), ...modes.slice(0, round % modes.length)];
      for (const completion of order) {
        const row = await ledgerflowEndToEnd(server, {
          workload,
          clients,
          runs,
          warmUp: 20,
          registrations,
          completion,
        });
        total[completion].runs += row.workflows;
        total[completion].seconds += row.seconds;
        total[completion].commits += row.commitsPerWorkflow / rounds;
        log(`wait c=${clients} round ${round + 1} ${completion}: ${row.workflowsPerSecond.toFixed(0)} workflows/s`);
      }
    }
    const [event, waited, split] = modes.map((m) => total[m].runs / total[m].seconds) as [number, number, number];
    lines.push(
      `| ${clients} | ${event.toFixed(0)} | ${waited.toFixed(0)} | ${split.toFixed(0)} | ${(waited / event).toFixed(2)} | ${(split / event).toFixed(2)} | ` +
        `${modes.map((m) => total[m].commits.toFixed(2)).join(', ')} |`,
    );
  }
  return lines.join('\n');
}

/**
 * What a queue costs a step when its limit is never reached: W1's one transactional step behind a
 * queue of 10 000 slots against the same step unqueued, in alternating rounds of the same run at
 * c = 4 and 16 (each drain on a fresh database). Each rate is its steps over its seconds summed
 * over the rounds.
 */
async function queuedVersusPlain(
  server: BenchServer,
  registrations: ReturnType<typeof benchRegistrations>,
  n: number,
): Promise<string> {
  const rounds = positiveInt('LEDGERFLOW_BENCH_QUEUE_ROUNDS', 2);
  const queueRegistrations = [...registrations, ...queueBenchRegistrations()];
  const lines = [
    '| concurrency | W1: steps/s | W1 through a queue: steps/s | queued / W1 | commits / step W1, queued |',
    '|---:|---:|---:|---:|---:|',
  ];
  for (const concurrency of [4, 16]) {
    const total = { plain: { steps: 0, seconds: 0, commits: 0 }, queued: { steps: 0, seconds: 0, commits: 0 } };
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? (['plain', 'queued'] as const) : (['queued', 'plain'] as const);
      for (const variant of order) {
        const { row, counts } = await durableDrain(server, {
          workflow: variant === 'plain' ? oneStep : queuedOneStep,
          runs: n,
          stepsPerRun: 1,
          concurrency,
          registrations: queueRegistrations,
          notes: [],
          label: variant === 'plain' ? 'W1 one-step drain' : 'W1 through a queue (limit never reached)',
        });
        total[variant].steps += row.steps;
        total[variant].seconds += row.seconds;
        total[variant].commits += (row.commitsPerStep ?? 0) / rounds;
        const perStep = Object.entries(counts.latencyMs)
          .map(
            ([queryClass, { count, ms }]) =>
              `${queryClass} ${(count / row.steps).toFixed(2)}×${count === 0 ? 0 : (ms / count).toFixed(1)} ms`,
          )
          .join(', ');
        log(
          `queue c=${concurrency} round ${round + 1} ${variant}: ${row.stepsPerSecond.toFixed(0)} steps/s (per step: ${perStep})`,
        );
      }
    }
    const plain = total.plain.steps / total.plain.seconds;
    const queued = total.queued.steps / total.queued.seconds;
    lines.push(
      `| ${concurrency} | ${plain.toFixed(0)} | ${queued.toFixed(0)} | ${(queued / plain).toFixed(2)} | ` +
        `${total.plain.commits.toFixed(2)}, ${total.queued.commits.toFixed(2)} |`,
    );
  }
  return lines.join('\n');
}

/** W1 plain, with the OpenTelemetry API but no SDK, and with the SDK (bench/workloads/telemetry.ts). */
async function telemetryOverhead(
  server: BenchServer,
  registrations: ReturnType<typeof benchRegistrations>,
  n: number,
): Promise<TelemetryOverhead> {
  const concurrency = 4;
  const result = await measureTelemetryOverhead({
    workflow: oneStep,
    registrations,
    runs: n,
    concurrency,
    rounds: positiveInt('LEDGERFLOW_BENCH_TELEMETRY_ROUNDS', 2),
    stores: async (label) => {
      const { url } = await prepareDatabase(server, `bench_${label}`);
      const enqueueStore = createPgStore({ connectionString: url, maxConnections: 16 });
      const workerStore = createPgStore({ connectionString: url, maxConnections: concurrency + 2 });
      return {
        enqueueStore,
        workerStore,
        close: async () => {
          await enqueueStore.close().catch(() => {});
          await workerStore.close().catch(() => {});
        },
      };
    },
  });
  const plain = result.variants[0]!;
  for (const v of result.variants) {
    log(
      `telemetry ${v.variant} W1 c=${concurrency}: ${v.stepsPerSecond.toFixed(0)} steps/s (${(v.stepsPerSecond / plain.stepsPerSecond).toFixed(3)} × plain), ` +
        `${v.cpuMsPerStep.toFixed(3)} worker CPU ms/step (${(v.cpuMsPerStep / plain.cpuMsPerStep).toFixed(3)} × plain)`,
    );
  }
  log(`telemetry SDK: ${result.spansPerRun.toFixed(2)} spans exported per run`);
  return result;
}

async function withStores<T, S extends Store[]>(stores: [...S], use: (stores: S) => Promise<T>): Promise<T> {
  try {
    return await use(stores);
  } finally {
    for (const store of stores) await store.close().catch(() => {});
  }
}

function writeResults(results: BenchResults): void {
  const dir = join(dirname(fileURLToPath(import.meta.url)), 'results');
  mkdirSync(dir, { recursive: true });
  const day = results.environment.date.slice(0, 10);
  const series: ChartSeries[] = [
    {
      label: 'W0 floor (commits/s)',
      floor: true,
      points: results.floor.map((r) => ({ concurrency: r.concurrency, value: r.stepsPerSecond })),
    },
    ...groupBy(results.durable, (r) => r.workload).map(([label, rows]) => ({
      label,
      points: rows.map((r) => ({ concurrency: r.concurrency, value: r.stepsPerSecond })),
    })),
  ];
  const svg = renderChartSvg({
    title: 'ledgerflow steps/s against concurrency',
    subtitle: `${results.environment.serverVersion}, fsync ${results.environment.fsync}, synchronous_commit ${results.environment.synchronousCommit}, ${results.environment.cpuCount} CPUs — ${day}`,
    yLabel: 'steps per second',
    series,
  });
  const png = renderChartPng(svg);
  for (const base of [day, 'latest']) {
    writeFileSync(join(dir, `${base}.svg`), svg);
    writeFileSync(join(dir, `${base}.png`), png);
    writeFileSync(join(dir, `${base}.md`), renderMarkdown(results, `${base}.png`));
  }
  log(`wrote bench/results/${day}.md, .svg, .png (and latest.*)`);
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Array<[string, T[]]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return [...groups];
}

function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`${name} must be a positive integer (got "${raw}").`);
  }
  return value;
}

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

await main();
