import { MigrationError } from '../../errors.js';
import { formatEventJson } from '../../telemetry/event-log.js';
import { createWorker } from '../../worker/worker.js';
import type { WorkerEvent } from '../../worker/worker-events.js';
import { defineCommand, integerOption, UsageError } from '../command.js';
import { contractDrift } from '../contract-check.js';
import { durationOption } from '../duration-option.js';
import { formatTime } from '../../presentation/format-values.js';
import { loadSchedulesExport } from '../load-schedules.js';
import { loadWorkflowsModule, requireRegistrations } from '../load-workflows.js';

const QUIET_EVENTS = new Set<WorkerEvent['type']>([
  'worker-started',
  'versions-unserved',
  'worker-stopped',
  'error',
  'schedule-failed',
  'run-parked',
  'commit-outcome-unknown',
  'step-crashed',
  'listener-lost',
  'listener-restored',
]);

export const workerCommand = defineCommand({
  name: 'worker',
  summary: 'run a worker until SIGTERM/SIGINT',
  usage: '--workflows <module> [--concurrency <n>] [options]',
  description:
    'Claims runnable runs of the given workflows and executes their steps, reconciling open intents on the\n' +
    'side; registers the schedules the module exports as `schedules` and starts one run per due tick.\n' +
    'SIGTERM or SIGINT (Ctrl-C) stops claiming, lets in-flight steps finish (or releases them after one\n' +
    'lease) and exits 0; a second signal releases in-flight runs at once.',
  options: {
    workflows: { type: 'string' },
    concurrency: { type: 'string' },
    'worker-id': { type: 'string' },
    'lease-ms': { type: 'string' },
    'poll-ms': { type: 'string' },
    'reconcile-ms': { type: 'string' },
    'schedule-ms': { type: 'string' },
    'prune-older-than': { type: 'string' },
    'prune-events-older-than': { type: 'string' },
    quiet: { type: 'boolean', short: 'q' },
    'log-format': { type: 'string' },
    'allow-missing-versions': { type: 'boolean' },
    'skip-contract-check': { type: 'boolean' },
  },
  optionsHelp: `  --workflows <module>   module exporting \`workflows\`: registrations with handlers (required),
                         and optionally \`schedules\`: schedule(...) declarations to register and tick
  --concurrency <n>      runs driven at once (default 4)
  --worker-id <id>       lease owner name (default host:pid:random)
  --lease-ms <n>         lease length (default 30000)
  --poll-ms <n>          claim poll interval when no NOTIFY arrives (default 1000)
  --reconcile-ms <n>     reconcile pass interval; 0 turns it off (default 10000)
  --schedule-ms <n>      how often to look for due schedule ticks; 0 turns it off (default 1000)
  --prune-older-than <duration>
                         every 10 minutes, prune runs finished this long ago (30d, 12h, 90m),
                         keeping their identity in the archive, as \`ledgerflow prune\` does
  --prune-events-older-than <duration>
                         with --prune-older-than: also prune events consumed this long ago
                         (their dedupe keys stay in the archive)
  --allow-missing-versions
                         start even if an older version of a workflow has unfinished runs and no
                         handlers here (another worker serves it during a rolling deploy)
  --skip-contract-check  do not run codegen in memory at start to compare the served versions with
                         generated/ (the database's registered definitions are still compared)
  --log-format <format>  text (default): one line per event; json: one JSON object per line with
                         time, level, event, message and the event's OpenTelemetry attributes
  -q, --quiet            print only lifecycle, errors and parked runs`,
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, json, io, openStore }) {
    if (values.workflows === undefined) {
      throw new UsageError(
        '--workflows <module> is required: a module exporting `workflows`, the registrations with handlers.',
      );
    }
    const logFormat = values['log-format'] ?? 'text';
    if (logFormat !== 'text' && logFormat !== 'json') {
      throw new UsageError(`--log-format must be text or json (got "${logFormat}").`);
    }
    const concurrency = integerOption('concurrency', values.concurrency);
    const leaseMs = integerOption('lease-ms', values['lease-ms']);
    const pollIntervalMs = integerOption('poll-ms', values['poll-ms']);
    const reconcileIntervalMs = integerOption('reconcile-ms', values['reconcile-ms'], 0);
    const scheduleIntervalMs = integerOption('schedule-ms', values['schedule-ms'], 0);
    const pruneOlderThanMs = durationOption('prune-older-than', values['prune-older-than']);
    const pruneEventsOlderThanMs = durationOption('prune-events-older-than', values['prune-events-older-than']);
    if (pruneEventsOlderThanMs !== undefined && pruneOlderThanMs === undefined) {
      throw new UsageError(
        '--prune-events-older-than needs --prune-older-than (the worker prunes runs and events in one pass).',
      );
    }
    const workflows = requireRegistrations(await loadWorkflowsModule(values.workflows), values.workflows);
    const schedules = await loadSchedulesExport(values.workflows);
    if (values['skip-contract-check'] !== true) {
      const served = workflows.map((r) => ({ name: r.workflow.name, version: r.workflow.version }));
      const problems = await contractDrift(process.cwd(), served);
      if (problems !== null && problems.length > 0) {
        throw new MigrationError(
          `Cannot start the worker: what it serves differs from the generated contract.\n${problems.join('\n')}`,
        );
      }
    }
    const store = await openStore();
    const quiet = values.quiet === true;
    const line = (event: WorkerEvent): string =>
      logFormat === 'json'
        ? formatEventJson(event)
        : json
          ? JSON.stringify({ at: new Date().toISOString(), ...event })
          : formatEvent(event);

    const worker = createWorker({
      store,
      workflows,
      ...(concurrency !== undefined ? { concurrency } : {}),
      ...(values['worker-id'] !== undefined ? { workerId: values['worker-id'] } : {}),
      ...(leaseMs !== undefined ? { leaseMs } : {}),
      ...(values['allow-missing-versions'] === true ? { allowMissingVersions: true } : {}),
      ...(pollIntervalMs !== undefined ? { pollIntervalMs } : {}),
      ...(reconcileIntervalMs !== undefined ? { reconcileIntervalMs } : {}),
      ...(schedules.length > 0 ? { schedules } : {}),
      ...(scheduleIntervalMs !== undefined ? { scheduleIntervalMs } : {}),
      ...(pruneOlderThanMs !== undefined
        ? {
            retention: {
              completedOlderThanMs: pruneOlderThanMs,
              ...(pruneEventsOlderThanMs !== undefined ? { eventsOlderThanMs: pruneEventsOlderThanMs } : {}),
            },
          }
        : {}),
      onEvent(event) {
        if (quiet && !QUIET_EVENTS.has(event.type)) return;
        io.out(`${line(event)}\n`);
      },
    });

    // Signals are handled before start(), so one that arrives while starting still stops cleanly.
    let signalled: (signal: NodeJS.Signals) => void = () => {};
    const firstSignal = new Promise<NodeJS.Signals>((resolve) => (signalled = resolve));
    let signals = 0;
    let stopping: Promise<void> | undefined;
    const onSignal = (signal: NodeJS.Signals): void => {
      signals++;
      if (signals === 1) signalled(signal);
      else {
        io.err(`${signal} again: releasing in-flight runs now.\n`);
        stopping = worker.stop({ timeoutMs: 0 });
      }
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    try {
      await worker.start();
      if (!json) {
        const names = workflows.map((r) => `${r.workflow.name} v${r.workflow.version}`).join(', ');
        const ticking = schedules.length > 0 ? ` and schedules ${schedules.map((s) => s.name).join(', ')}` : '';
        io.err(`Worker ${worker.id} running ${names}${ticking} on ${store.location}. Stop with Ctrl-C or SIGTERM.\n`);
      }
      const signal = await firstSignal;
      if (!json) io.err(`${signal}: no new claims; finishing in-flight steps…\n`);
      await worker.stop();
      await stopping;
      if (!json) io.err(`Worker ${worker.id} stopped.\n`);
      return 0;
    } finally {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
    }
  },
});

/** `12:00:01Z run-claimed runId=… workflow=…`: one line per event, values flattened. */
function formatEvent(event: WorkerEvent): string {
  const { type, ...fields } = event;
  const parts = Object.entries(fields).map(([name, value]) => `${name}=${formatField(value)}`);
  return `${formatTime(new Date()).slice(11)} ${type} ${parts.join(' ')}`.trimEnd();
}

function formatField(value: unknown): string {
  if (value instanceof Date) return formatTime(value);
  if (typeof value === 'string') return /\s/.test(value) ? JSON.stringify(value) : value;
  if (typeof value === 'object' && value !== null) {
    if ('message' in value && typeof value.message === 'string') return JSON.stringify(value.message);
    if ('examined' in value) {
      const r = value as { examined: number; recorded: number; released: number; parked: number };
      return `examined:${r.examined},recorded:${r.recorded},released:${r.released},parked:${r.parked}`;
    }
    return JSON.stringify(value);
  }
  return String(value);
}
