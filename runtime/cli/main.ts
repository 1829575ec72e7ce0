import { parseArgs } from 'node:util';
import type { Store } from '../store/store.js';
import { processIo, type CliIo } from './cli-io.js';
import { auditCommand } from './commands/audit.js';
import { cancelCommand } from './commands/cancel.js';
import { dashboardCommand } from './commands/dashboard.js';
import { devCommand } from './commands/dev.js';
import { effectsCommand } from './commands/effects.js';
import { grantsCommand } from './commands/grants.js';
import { initCommand } from './commands/init.js';
import { limitsCommand } from './commands/limits.js';
import { migrateCommand } from './commands/migrate.js';
import { pruneCommand } from './commands/prune.js';
import { queuesCommand } from './commands/queues.js';
import { reconcileCommand } from './commands/reconcile.js';
import { resolveCommand } from './commands/resolve.js';
import { retryCommand } from './commands/retry.js';
import { runCommand } from './commands/run.js';
import { runsCommand } from './commands/runs.js';
import { schedulesCommand } from './commands/schedules.js';
import { sendEventCommand } from './commands/send-event.js';
import { signalCommand } from './commands/signal.js';
import { startCommand } from './commands/start.js';
import { versionsCommand } from './commands/versions.js';
import { workerCommand } from './commands/worker.js';
import {
  EXIT_CODES_HELP,
  GLOBAL_OPTIONS,
  GLOBAL_OPTIONS_HELP,
  UsageError,
  type Command,
  type Invocation,
  type ParseArgsOptionsConfig,
} from './command.js';
import { openCliStore } from './open-cli-store.js';
import { reportError } from './report-error.js';

const COMMANDS: readonly Command[] = [
  initCommand,
  migrateCommand,
  workerCommand,
  startCommand,
  sendEventCommand,
  signalCommand,
  runsCommand,
  runCommand,
  effectsCommand,
  cancelCommand,
  reconcileCommand,
  versionsCommand,
  queuesCommand,
  schedulesCommand,
  retryCommand,
  resolveCommand,
  auditCommand,
  pruneCommand,
  dashboardCommand,
  devCommand,
  grantsCommand,
  limitsCommand,
];

function globalHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length));
  return (
    'Usage: ledgerflow <command> [options]\n\n' +
    'Durable workflows on PostgreSQL in which every side effect happens once.\n\n' +
    'Commands:\n' +
    `  ${'codegen'.padEnd(width)}  generate contracts, migrations and REVIEW.md (see ledgerflow codegen --help)\n` +
    COMMANDS.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`).join('\n') +
    `\n\n${GLOBAL_OPTIONS_HELP}\n\n` +
    'The database is PostgreSQL when --database-url or DATABASE_URL is given, otherwise an embedded\n' +
    'PGlite (one process at a time, fsync off) under .ledgerflow/db — served to the other commands by\n' +
    '`ledgerflow dev` while it runs.\n\n' +
    `${EXIT_CODES_HELP}\nRun \`ledgerflow <command> --help\` for a command's options.\n`
  );
}

/**
 * The `ledgerflow` command line (every command but `codegen`). Returns the exit code instead
 * of exiting, so tests can call it in-process with their own `io`.
 *
 * @example
 * process.exitCode = await main(['runs', '--status', 'failed', '--json']);
 */
export async function main(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const at = commandIndex(argv);
  const name = at === -1 ? undefined : argv[at]!;
  if (name === undefined) {
    const wantsHelp = argv.includes('--help') || argv.includes('-h');
    if (wantsHelp) {
      io.out(globalHelp());
      return 0;
    }
    io.err(globalHelp());
    return 2;
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (command === undefined) {
    return reportError(
      new UsageError(`Unknown command "${name}". Commands: codegen, ${COMMANDS.map((c) => c.name).join(', ')}.`),
      '',
      io,
    );
  }

  let store: Store | undefined;
  try {
    const args = [...argv.slice(0, at), ...argv.slice(at + 1)];
    const { values, positionals } = parseCommandLine(args, { ...GLOBAL_OPTIONS, ...command.options });
    if (values['help'] === true) {
      io.out(command.help());
      return 0;
    }
    const { min, max, names } = command.positionals;
    if (positionals.length < min || positionals.length > max) {
      throw new UsageError(
        max === 0
          ? `takes no arguments (got ${positionals.map((p) => JSON.stringify(p)).join(' ')}).`
          : `expects ${names}${positionals.length > max ? ` only (extra: ${positionals.slice(max).join(' ')})` : ''}.`,
      );
    }
    const flags = { databaseUrl: stringValue(values['database-url']), dataDir: stringValue(values['data-dir']) };
    return await command.run({
      values: values as Invocation<ParseArgsOptionsConfig>['values'],
      positionals,
      json: values['json'] === true,
      io,
      openStore: async () => (store ??= await openCliStore(flags, io)),
    });
  } catch (error) {
    return reportError(error, command.name, io);
  } finally {
    await store?.close().catch(() => {});
  }
}

/** Index of the command word: the first argument that is neither a global option nor its value. */
function commandIndex(argv: readonly string[]): number {
  const takesValue = new Set(
    Object.entries(GLOBAL_OPTIONS as ParseArgsOptionsConfig)
      .filter(([, spec]) => spec.type === 'string')
      .map(([long]) => `--${long}`),
  );
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('-')) return i;
    if (takesValue.has(arg)) i++;
  }
  return -1;
}

function parseCommandLine(
  args: string[],
  options: ParseArgsOptionsConfig,
): { values: Record<string, string | boolean | Array<string | boolean> | undefined>; positionals: string[] } {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    // node:util reports unknown options and missing values with a readable message and an ERR_PARSE_ARGS_* code.
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS')) throw new UsageError((error as Error).message);
    throw error;
  }
}

function stringValue(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}
