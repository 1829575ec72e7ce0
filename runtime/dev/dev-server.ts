import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { serveDashboard, type ServeDashboardOptions, type ServedDashboard } from '../dashboard/serve-dashboard.js';
import { migrate } from '../migrate/migrate.js';
import { createPGliteStore, type PGliteStore } from '../store/pglite/pglite-store.js';
import { ChildCommand } from './child-command.js';
import { writeDevServerFile } from './dev-server-file.js';
import { serveWireBridge, type WireBridge } from './wire-bridge.js';

export interface DevServerOptions {
  readonly dataDir: string;
  /** The module exporting `workflows` (registrations with handlers), as `ledgerflow worker --workflows`. */
  readonly workflowsModule: string;
  /** Migration directories applied at start and after every clean codegen run (those that exist). */
  readonly migrationDirs: readonly string[];
  /** Port of the PostgreSQL bridge on 127.0.0.1; 0 (default) picks a free one. */
  readonly databasePort?: number;
  readonly dashboardPort: number;
  /** Definitions the dashboard checks a found output against (loaded once, at start). */
  readonly dashboardWorkflows: NonNullable<ServeDashboardOptions['workflows']>;
  /** Extra `ledgerflow worker` options, e.g. `['--concurrency', '8']`. */
  readonly workerArgs: readonly string[];
  /** One line of the dev server's own, or of its worker or codegen (already prefixed). */
  readonly log: (stream: 'out' | 'err', line: string) => void;
}

export interface DevServer {
  readonly url: string;
  readonly dashboardUrl: string;
  /** Stops codegen and the worker (gracefully), the dashboard and the bridge, closes the database. */
  close(): Promise<void>;
}

/** The summary line that ends every `ledgerflow codegen` report. */
const CODEGEN_SUMMARY = /^ledgerflow codegen: .*?(\d+) error\(s\)/;

/**
 * `ledgerflow dev`: the embedded PGlite opened once and served to other processes over the
 * PostgreSQL protocol ({@link serveWireBridge}), the dashboard on the same store, `codegen
 * --watch`, and a worker in a child process that is replaced after every codegen run that finds
 * no error. States of the worker slot: none → running → (codegen clean) stopping → running …; a
 * codegen run with errors leaves it as it is (the previous, accepted code keeps running); a
 * worker that exits by itself leaves none until the next clean run.
 */
export async function startDevServer(options: DevServerOptions): Promise<DevServer> {
  const store: PGliteStore = await createPGliteStore({ dataDir: options.dataDir });
  // Before the first codegen run generated/migrations may not exist yet: the core schema first.
  const migrateExisting = () => migrate(store, { sources: options.migrationDirs.filter((dir) => existsSync(dir)) });
  let bridge: WireBridge | undefined;
  let dashboard: ServedDashboard | undefined;
  try {
    await migrateExisting();
    bridge = await serveWireBridge(store, { port: options.databasePort ?? 0 });
    dashboard = await serveDashboard({ store, workflows: options.dashboardWorkflows, port: options.dashboardPort });
  } catch (error) {
    await dashboard?.close();
    await bridge?.close();
    await store.close();
    throw error;
  }
  const served = { bridge, dashboard };
  const removeFile = writeDevServerFile({
    url: bridge.url,
    pid: process.pid,
    dataDir: resolve(options.dataDir),
    dashboardUrl: dashboard.url,
  });
  const log = options.log;
  const workerEnv = { ...process.env, DATABASE_URL: bridge.url };

  let worker: ChildCommand | undefined;
  let closing = false;
  /** Reloads run one at a time, in the order codegen reported. */
  let reloads: Promise<void> = Promise.resolve();
  const reload = (): void => {
    reloads = reloads
      .then(async () => {
        if (closing) return;
        // New workflow versions bring their migrations; a worker refuses versions the database lacks.
        const result = await migrateExisting();
        for (const name of result.applied) log('err', `ledgerflow dev: applied migration ${name}`);
        const previous = worker;
        worker = undefined;
        if (previous !== undefined) {
          log(
            'err',
            'ledgerflow dev: stopping the worker (its in-flight runs finish or are released to the next one)…',
          );
          await previous.stop();
        }
        if (closing) return;
        // Started only after a codegen run without errors wrote generated/: the worker's own in-memory
        // codegen run at start would repeat that run, so it is skipped (the database's registered
        // definitions are still compared).
        const workerCommand = [
          'worker',
          '--workflows',
          options.workflowsModule,
          '--skip-contract-check',
          ...options.workerArgs,
        ];
        const started = new ChildCommand(workerCommand, workerEnv, (stream, line) => log(stream, `[worker] ${line}`));
        worker = started;
        void started.exited.then((code) => {
          if (worker !== started || closing) return;
          worker = undefined;
          log(
            'err',
            `ledgerflow dev: the worker exited (code ${code}); it starts again after the next change that codegen accepts.`,
          );
        });
      })
      .catch((error: unknown) =>
        log('err', `ledgerflow dev: reload failed: ${error instanceof Error ? error.message : String(error)}`),
      );
  };

  let report: string[] = [];
  const codegen = new ChildCommand(['codegen', '--watch'], process.env, (stream, line) => {
    if (stream === 'err') {
      log('err', `[codegen] ${line}`);
      return;
    }
    report.push(line);
    const summary = CODEGEN_SUMMARY.exec(line);
    if (summary === null) return;
    const lines = report;
    report = [];
    if (Number(summary[1]) > 0) {
      log('err', `ledgerflow dev: codegen rejects the workflows; the worker keeps running the code it loaded before:`);
      for (const reported of lines) log('err', `  ${reported}`);
      return;
    }
    log('err', `[codegen] ${line}`);
    reload();
  });
  void codegen.exited.then((code) => {
    if (!closing)
      log(
        'err',
        `ledgerflow dev: codegen --watch exited (code ${code}); changes are no longer picked up. Restart ledgerflow dev.`,
      );
  });

  return {
    url: served.bridge.url,
    dashboardUrl: served.dashboard.url,
    async close() {
      closing = true;
      await codegen.stop();
      await reloads;
      await worker?.stop();
      removeFile();
      await served.dashboard.close();
      await served.bridge.close();
      await store.close();
    },
  };
}
