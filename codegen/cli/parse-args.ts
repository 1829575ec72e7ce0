import { OUTPUT_FORMATS, type OutputFormat } from '../report/format-diagnostics.js';
import type { CheckedCodegenOption } from '../run-codegen.js';

export interface CliOptions {
  readonly help: boolean;
  readonly check: boolean;
  readonly watch: boolean;
  readonly strict: boolean;
  readonly format: OutputFormat;
  readonly root: string | undefined;
  readonly include: readonly string[] | undefined;
  readonly out: string | undefined;
  /** `--retire name@version`, in the order given (runCodegen checks them). */
  readonly retire: readonly string[];
  /** `--release name@version`, in the order given (runCodegen checks them). */
  readonly release: readonly string[];
}

export const USAGE = `Usage: ledgerflow codegen [options]

Finds workflow declarations and the handler modules bound to them, checks them (LF001-LF018) and
generates handler contracts, typed event senders, migrations, ledgerflow.manifest.json and
REVIEW.md.

Options:
  --check            regenerate in memory and compare with the output directory; exit 1 if
                     anything is stale, missing or extra, or on any error (what CI runs)
  --format <format>  text (default): path:line:col - error LF001: message
                     github: ::error file=...,line=...,col=...:: annotations
                     json: one document {"diagnostics": [...], "errors", "warnings", "outOfDate"}
                     (outOfDate: the differing files with --check, else null)
  --watch            run again whenever a workflow, handler or schedule module changes, appears
                     or disappears, printing the same report each time; until Ctrl-C or SIGTERM
                     (exit 0). Parsed sources are kept between runs
  --strict           warnings (LF005 on transactional and child keys, LF011 calls, LF012, LF015)
                     fail too
  --root <dir>       directory to search; paths are reported relative to it (default: cwd)
  --include <glob>   workflow files, relative to --root; repeatable (default: **/*.workflow.ts)
  --out <dir>        output directory inside --root (default: generated)
  --retire <name@version>
                     take a workflow version that is no longer declared out of the manifest
                     and delete its contract, once no run of it is unfinished (see
                     \`ledgerflow versions\`); repeatable. Without it, a version in the manifest
                     that is not declared is an error (LF009)
  --release <name@version>
                     make a draft version final: from then on any change to it needs a new
                     version (LF007); repeatable. A version new to the manifest is a draft,
                     free to change until it is released (docs/versions.md)
  -h, --help         show this help

Exit codes: 0 ok, 1 errors or out-of-date output, 2 bad command line.
`;

/** The flag that sets each option runCodegen checks, for wording its errors on the command line. */
export const OPTION_FLAGS: Readonly<Record<CheckedCodegenOption, string>> = {
  root: '--root',
  outDir: '--out',
  retire: '--retire',
  release: '--release',
};

/**
 * A bad `ledgerflow codegen` command line (exit 2). Its own class, not the runtime CLI's
 * `UsageError`: codegen and the runtime are independent layers, each with its own command line.
 */
export class CodegenUsageError extends Error {
  override readonly name = 'CodegenUsageError';
}

/**
 * Parses `codegen`'s arguments (without the word `codegen`). Accepts `--flag value` and
 * `--flag=value`; anything unknown is a CodegenUsageError naming it.
 */
export function parseArgs(argv: readonly string[]): CliOptions {
  let help = false;
  let check = false;
  let watch = false;
  let strict = false;
  let format: OutputFormat = 'text';
  let root: string | undefined;
  let out: string | undefined;
  const include: string[] = [];
  const retire: string[] = [];
  const release: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const argument = argv[i]!;
    const equals = argument.startsWith('--') ? argument.indexOf('=') : -1;
    const flag = equals === -1 ? argument : argument.slice(0, equals);
    const inline = equals === -1 ? undefined : argument.slice(equals + 1);
    const value = (): string => {
      if (inline !== undefined) return inline;
      const next = argv[i + 1];
      if (next === undefined || next.startsWith('--')) throw new CodegenUsageError(`${flag} needs a value.`);
      i++;
      return next;
    };
    const noValue = (): void => {
      if (inline !== undefined) throw new CodegenUsageError(`${flag} takes no value (got "${argument}").`);
    };
    switch (flag) {
      case '-h':
      case '--help':
        noValue();
        help = true;
        break;
      case '--check':
        noValue();
        check = true;
        break;
      case '--watch':
        noValue();
        watch = true;
        break;
      case '--strict':
        noValue();
        strict = true;
        break;
      case '--format': {
        const given = value();
        if (!(OUTPUT_FORMATS as readonly string[]).includes(given)) {
          throw new CodegenUsageError(`--format must be one of ${OUTPUT_FORMATS.join(', ')} (got "${given}").`);
        }
        format = given as OutputFormat;
        break;
      }
      case '--root':
        root = value();
        break;
      case '--include':
        include.push(value());
        break;
      case '--out':
        out = value();
        break;
      case '--retire':
        retire.push(value());
        break;
      case '--release':
        release.push(value());
        break;
      default:
        throw new CodegenUsageError(
          argument.startsWith('-')
            ? `Unknown option "${flag}".`
            : `Unexpected argument "${argument}": codegen takes options only (did you mean --root ${argument}?).`,
        );
    }
  }
  if (watch && check)
    throw new CodegenUsageError('--watch writes as files change; --check compares once. Use one of them.');
  return {
    help,
    check,
    watch,
    strict,
    format,
    root,
    include: include.length > 0 ? include : undefined,
    out,
    retire,
    release,
  };
}
