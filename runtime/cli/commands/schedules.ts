import type { CatchUpPolicy } from '../../../dsl/schedule.js';
import { createClient } from '../../client/client.js';
import type { ScheduleSummary } from '../../client/schedules.js';
import { defineCommand, integerOption, UsageError } from '../command.js';
import { formatTable } from '../format-table.js';
import { formatStoredError, formatTime, toJsonDocument } from '../../presentation/format-values.js';
import { NOTE_OPTIONS, NOTE_OPTIONS_HELP, noteOption } from '../operator-note.js';

const ACTIONS = ['pause', 'resume'] as const;

export const schedulesCommand = defineCommand({
  name: 'schedules',
  summary: 'list schedules with their next ticks and last run; pause or resume one',
  usage: '[pause <name> | resume <name> [--reason <text> [--actor <name>]]] [--ticks <n>] [options]',
  description:
    'Lists the schedules workers registered: cron, time zone, workflow, catch-up policy, whether paused, the\n' +
    'next ticks (the first is overdue when no worker has the schedule, or its last tick failed), the last tick\n' +
    'that started a run and that run. A tick whose run could not start is listed below the table with its error.\n' +
    '`pause <name>` stops a schedule from starting runs; `resume <name>` goes on from its next tick after now\n' +
    '(ticks that fell while it was paused start nothing). Both are kept when workers register it again.\n' +
    'With --reason, a pause or resume is written to the audit trail (ledgerflow audit).',
  options: {
    ticks: { type: 'string' },
    ...NOTE_OPTIONS,
  },
  optionsHelp: `  --ticks <n>            how many next ticks to show (default 3)
${NOTE_OPTIONS_HELP}`,
  positionals: { min: 0, max: 2, names: 'nothing, or pause <name> / resume <name>' },
  async run({ values, positionals, json, io, openStore }) {
    const [action, name] = positionals;
    if (action !== undefined) {
      if (!(ACTIONS as readonly string[]).includes(action)) {
        throw new UsageError(
          `Unknown action "${action}". Use \`ledgerflow schedules\`, \`schedules pause <name>\` or \`schedules resume <name>\`.`,
        );
      }
      if (name === undefined)
        throw new UsageError(`${action} needs the schedule's name: ledgerflow schedules ${action} <name>.`);
      const note = noteOption(values, false, `a schedule ${action}`);
      const client = createClient({ store: await openStore() });
      const changed =
        action === 'pause' ? await client.pauseSchedule(name, note) : await client.resumeSchedule(name, note);
      const paused = action === 'pause';
      if (json) io.out(toJsonDocument({ schedule: name, paused, changed }));
      else if (!changed) io.out(`Schedule ${name} was already ${paused ? 'paused' : 'running'}.\n`);
      else if (paused)
        io.out(`Paused schedule ${name}: it starts no run until \`ledgerflow schedules resume ${name}\`.\n`);
      else {
        const [resumed] = (await client.listSchedules({ ticks: 1 })).filter((s) => s.name === name);
        io.out(`Resumed schedule ${name}; its next tick is ${formatTime(resumed?.nextTicks[0])}.\n`);
      }
      return 0;
    }
    if (values.reason !== undefined || values.actor !== undefined) {
      throw new UsageError('--reason and --actor go with `schedules pause <name>` or `schedules resume <name>`.');
    }
    const ticks = integerOption('ticks', values.ticks, 0);
    const schedules = await createClient({ store: await openStore() }).listSchedules(
      ticks !== undefined ? { ticks } : {},
    );
    if (json) {
      io.out(toJsonDocument(schedules));
      return 0;
    }
    if (schedules.length === 0) {
      io.out(
        'No schedules are registered. Workers register the schedules they are given (a `schedules` export next to `workflows`).\n',
      );
      return 0;
    }
    io.out(
      formatTable(schedules, [
        { header: 'SCHEDULE', value: (s) => s.name },
        { header: 'CRON', value: (s) => s.cron },
        { header: 'TIMEZONE', value: (s) => s.timezone },
        { header: 'WORKFLOW', value: (s) => `${s.workflowName} v${s.workflowVersion}` },
        { header: 'CATCH-UP', value: (s) => formatCatchUp(s.catchUp) },
        { header: 'PAUSED', value: (s) => (s.paused ? 'yes' : 'no') },
        {
          header: 'NEXT TICKS',
          value: (s) => (s.nextTicks.length === 0 ? '-' : s.nextTicks.map(formatTime).join(', ')),
        },
        { header: 'LAST TICK', value: (s) => formatTime(s.lastTickAt) },
        { header: 'LAST RUN', value: formatLastRun },
      ]),
    );
    for (const s of schedules.filter((x) => x.lastError !== null)) {
      io.out(
        `${s.name}: ${s.failures} tick attempt(s) failed, next at ${formatTime(s.retryAt)}: ${formatStoredError(s.lastError, 300)}\n`,
      );
    }
    return 0;
  },
});

function formatCatchUp(policy: CatchUpPolicy): string {
  return typeof policy === 'string' ? policy : `all (max ${policy.all.max})`;
}

function formatLastRun(s: ScheduleSummary): string {
  if (s.lastRunId === null) return '-';
  return `${s.lastRunId} ${s.lastRunStatus ?? 'deleted'}`;
}
