import { existsSync } from 'node:fs';
import { DEFAULT_DASHBOARD_PORT } from '../../dashboard/serve-dashboard.js';
import { devServerFile, findDevServer } from '../../dev/dev-server-file.js';
import { startDevServer } from '../../dev/dev-server.js';
import { DEFAULT_MIGRATIONS_DIR } from '../../migrate/migration-source.js';
import { DEFAULT_DATA_DIR } from '../../store/open-store.js';
import { defineCommand, integerOption, UsageError } from '../command.js';
import { toJsonDocument } from '../../presentation/format-values.js';
import { DEFAULT_WORKFLOWS_MODULE, loadWorkflowsModule, type WorkflowEntry } from '../load-workflows.js';

export const devCommand = defineCommand({
  name: 'dev',
  summary: 'develop on the embedded database: serve it to other commands, run a reloading worker and the dashboard',
  usage: '--workflows <module> [--db-port <n>] [--port <n>] [--concurrency <n>] [--dir <directory>]... [options]',
  description:
    'Opens the embedded PGlite (--data-dir, default .ledgerflow/db) once and, until SIGTERM/SIGINT:\n' +
    '- serves it over the PostgreSQL protocol on 127.0.0.1 and records the address in dev.json beside it\n' +
    '  (.ledgerflow/dev.json): every other ledgerflow command run here finds it and connects, no DATABASE_URL;\n' +
    '- runs `ledgerflow codegen --watch`, and after every run without errors applies new migrations and\n' +
    '  replaces the worker (the old one stops gracefully; the new one takes over its runs). A run with\n' +
    '  errors prints them and keeps the worker that runs;\n' +
    '- serves the dashboard.\n' +
    'For development on one machine; use PostgreSQL (DATABASE_URL) for anything else.',
  options: {
    workflows: { type: 'string' },
    'db-port': { type: 'string' },
    port: { type: 'string' },
    concurrency: { type: 'string' },
    dir: { type: 'string', multiple: true },
  },
  optionsHelp: `  --workflows <module>   module exporting \`workflows\`: registrations with handlers (required), as for
                         \`ledgerflow worker\`
  --db-port <n>          PostgreSQL port on 127.0.0.1 (default 0: a free one, written to dev.json)
  --port <n>             dashboard port (default ${DEFAULT_DASHBOARD_PORT}; 0 picks a free one)
  --concurrency <n>      runs the worker drives at once (default 4)
  --dir <directory>      migrations directory applied at start and after each change; repeatable, as for
                         \`ledgerflow migrate\` (default: ${DEFAULT_MIGRATIONS_DIR})`,
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, json, io }) {
    if (values.workflows === undefined) {
      throw new UsageError(
        '--workflows <module> is required: the module `ledgerflow worker` would load, exporting `workflows` with handlers.',
      );
    }
    if (values['database-url'] !== undefined) {
      throw new UsageError(
        'ledgerflow dev serves the embedded PGlite; with PostgreSQL, run `ledgerflow worker` and `ledgerflow dashboard` instead.',
      );
    }
    const databasePort = integerOption('db-port', values['db-port'], 0) ?? 0;
    const dashboardPort = integerOption('port', values.port, 0) ?? DEFAULT_DASHBOARD_PORT;
    for (const [name, port] of [
      ['db-port', databasePort],
      ['port', dashboardPort],
    ] as const) {
      if (port > 65_535) throw new UsageError(`--${name} must be at most 65535 (got ${port}).`);
    }
    const concurrency = integerOption('concurrency', values.concurrency);
    const dataDir = values['data-dir'] ?? DEFAULT_DATA_DIR;
    const running = findDevServer(dataDir);
    if (running !== undefined) {
      throw new UsageError(
        `A dev server already serves ${dataDir}: pid ${running.pid} at ${running.url} (${devServerFile(dataDir)}). Stop it first.`,
      );
    }
    if (!existsSync(values.workflows)) throw new UsageError(`--workflows ${values.workflows}: no such file.`);
    if (process.env['DATABASE_URL']) {
      io.err(
        'Note: DATABASE_URL is set; ledgerflow dev serves the embedded PGlite, and other commands use DATABASE_URL while it is set.\n',
      );
    }
    // The dashboard's found-output check reads definitions only; loaded once, as `ledgerflow dashboard` does.
    let dashboardWorkflows: WorkflowEntry[] = [];
    if (existsSync(DEFAULT_WORKFLOWS_MODULE)) {
      dashboardWorkflows = await loadWorkflowsModule(DEFAULT_WORKFLOWS_MODULE).catch(() => []);
    }

    let signalled: (signal: NodeJS.Signals) => void = () => {};
    const signal = new Promise<NodeJS.Signals>((resolve) => (signalled = resolve));
    process.on('SIGTERM', signalled);
    process.on('SIGINT', signalled);
    try {
      const server = await startDevServer({
        dataDir,
        workflowsModule: values.workflows,
        migrationDirs: values.dir ?? [DEFAULT_MIGRATIONS_DIR],
        databasePort,
        dashboardPort,
        dashboardWorkflows,
        workerArgs: concurrency === undefined ? [] : ['--concurrency', String(concurrency)],
        log: (stream, line) => (stream === 'out' && !json ? io.out(`${line}\n`) : io.err(`${line}\n`)),
      });
      if (json)
        io.out(toJsonDocument({ url: server.url, dashboardUrl: server.dashboardUrl, file: devServerFile(dataDir) }));
      io.err(
        `ledgerflow dev: PGlite at ${dataDir} served at ${server.url} (recorded in ${devServerFile(dataDir)}); ` +
          `dashboard at ${server.dashboardUrl}. Other ledgerflow commands here use it. Stop with Ctrl-C or SIGTERM.\n`,
      );
      const received = await signal;
      io.err(`ledgerflow dev: ${received}: stopping the worker, codegen, the dashboard and the database…\n`);
      await server.close();
      io.err('ledgerflow dev: stopped.\n');
      return 0;
    } finally {
      process.off('SIGTERM', signalled);
      process.off('SIGINT', signalled);
    }
  },
});
