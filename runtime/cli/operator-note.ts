import { userInfo } from 'node:os';
import type { OperatorNote } from '../client/operator/operator-action.js';
import { UsageError, type ParseArgsOptionsConfig } from './command.js';

/** `--reason` and `--actor` of the commands that act on runs, effects, queues and schedules. */
export const NOTE_OPTIONS = {
  reason: { type: 'string' },
  actor: { type: 'string' },
} as const satisfies ParseArgsOptionsConfig;

export const NOTE_OPTIONS_HELP = `  --reason <text>        why, kept in the audit trail (ledgerflow audit)
  --actor <name>         who (default: the operating-system user, ${'`'}whoami${'`'})`;

/**
 * The audit note from `--reason` / `--actor` (default actor: the OS user name). `required`: the
 * action is always audited, so `--reason` must be given; otherwise no `--reason` means no note
 * (and `--actor` alone is a mistake).
 */
export function noteOption(
  values: { readonly reason?: string; readonly actor?: string },
  required: boolean,
  command: string,
): OperatorNote | undefined {
  if (values.reason === undefined) {
    if (required)
      throw new UsageError(
        `--reason <text> is required: ${command} is written to the audit trail with who did it and why.`,
      );
    if (values.actor !== undefined)
      throw new UsageError('--actor goes with --reason <text> (an audited action needs both).');
    return undefined;
  }
  return { actor: values.actor ?? defaultActor(), reason: values.reason };
}

function defaultActor(): string {
  try {
    return userInfo().username;
  } catch {
    throw new UsageError('Cannot tell who you are from the operating system; pass --actor <name>.');
  }
}
