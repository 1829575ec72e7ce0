import type { ParseArgsConfig } from 'node:util';
import type { Store } from '../store/store.js';
import type { CliIo } from './cli-io.js';

/** `node:util` parseArgs option declarations (the type itself is not exported by @types/node). */
export type ParseArgsOptionsConfig = NonNullable<ParseArgsConfig['options']>;

/** Options every command accepts, before or after the command name. */
export const GLOBAL_OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  json: { type: 'boolean' },
  'database-url': { type: 'string' },
  'data-dir': { type: 'string' },
} as const satisfies ParseArgsOptionsConfig;

export const GLOBAL_OPTIONS_HELP = `Global options:
  --json                 machine-readable output on stdout (one JSON document)
  --database-url <url>   PostgreSQL connection string (default: $DATABASE_URL)
  --data-dir <dir>       embedded PGlite directory when no PostgreSQL URL is given
                         (default: .ledgerflow/db)
  -h, --help             show help`;

export const EXIT_CODES_HELP = `Exit codes: 0 ok; 1 failed (rejected request, failed or parked run, finding); 2 bad command line.`;

type OptionValue<T> = T extends { readonly type: 'boolean'; readonly multiple: true }
  ? boolean[]
  : T extends { readonly type: 'boolean' }
    ? boolean
    : T extends { readonly type: 'string'; readonly multiple: true }
      ? string[]
      : string;

export type OptionValues<O extends ParseArgsOptionsConfig> = { readonly [K in keyof O]?: OptionValue<O[K]> };

/** A user mistake on the command line: printed with a pointer to `--help`, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export interface Invocation<O extends ParseArgsOptionsConfig> {
  readonly values: OptionValues<O & typeof GLOBAL_OPTIONS>;
  readonly positionals: readonly string[];
  readonly json: boolean;
  readonly io: CliIo;
  /** Opens the database once (PostgreSQL or PGlite, see --help); closed when the command returns. */
  openStore(): Promise<Store>;
}

export interface CommandSpec<O extends ParseArgsOptionsConfig> {
  readonly name: string;
  /** One line for the command list. */
  readonly summary: string;
  /** Arguments after the command name, e.g. `<workflow> --input <json> [options]`. */
  readonly usage: string;
  readonly description: string;
  readonly options: O;
  /** One line per option (aligned by hand), shown under "Options:". */
  readonly optionsHelp: string;
  readonly positionals: { readonly min: number; readonly max: number; readonly names: string };
  /** Returns the exit code. */
  run(invocation: Invocation<O>): Promise<number>;
}

/** A command with its option types erased, as the dispatcher holds it. */
export interface Command {
  readonly name: string;
  readonly summary: string;
  readonly options: ParseArgsOptionsConfig;
  readonly positionals: CommandSpec<ParseArgsOptionsConfig>['positionals'];
  help(): string;
  run(invocation: Invocation<ParseArgsOptionsConfig>): Promise<number>;
}

export function defineCommand<O extends ParseArgsOptionsConfig>(spec: CommandSpec<O>): Command {
  return {
    name: spec.name,
    summary: spec.summary,
    options: spec.options,
    positionals: spec.positionals,
    help: () =>
      `Usage: ledgerflow ${spec.name} ${spec.usage}\n\n${spec.description}\n\n` +
      (spec.optionsHelp ? `Options:\n${spec.optionsHelp}\n\n` : '') +
      `${GLOBAL_OPTIONS_HELP}\n\n${EXIT_CODES_HELP}\n`,
    // The dispatcher parsed argv with exactly `spec.options`, so the values have these types.
    run: (invocation) => spec.run(invocation as unknown as Invocation<O>),
  };
}

/** A positive integer option, or `undefined` when absent. */
export function integerOption(name: string, value: string | undefined, min = 1): number | undefined {
  if (value === undefined) return undefined;
  const parsed = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(parsed) || parsed < min) {
    throw new UsageError(`--${name} must be an integer >= ${min} (got "${value}").`);
  }
  return parsed;
}
