import { createClient } from '../../client/client.js';
import { defineCommand, integerOption } from '../command.js';
import { formatTable } from '../format-table.js';
import { formatJson, formatTime, toJsonDocument } from '../../presentation/format-values.js';

export const auditCommand = defineCommand({
  name: 'audit',
  summary: 'list operator actions (retry, resolve, cancel, pause, resume): who, when, why',
  usage: '[--run <run-id>] [--limit <n>] [options]',
  description:
    'Lists the audit trail of operator actions, newest first: when, who, what, on which run, effect key, queue\n' +
    "or schedule, why, and what the action found and did. Each row was written by the action's own\n" +
    'transaction; refused actions and actions that changed nothing have none.',
  options: {
    run: { type: 'string' },
    limit: { type: 'string' },
  },
  optionsHelp: `  --run <run-id>         only the actions on this run
  --limit <n>            at most n actions (default 50)`,
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, json, io, openStore }) {
    const limit = integerOption('limit', values.limit);
    const rows = await createClient({ store: await openStore() }).listAudit({
      ...(values.run !== undefined ? { runId: values.run } : {}),
      ...(limit !== undefined ? { limit } : {}),
    });
    if (json) {
      io.out(toJsonDocument(rows));
      return 0;
    }
    if (rows.length === 0) {
      io.out('No operator actions.\n');
      return 0;
    }
    io.out(
      formatTable(rows, [
        { header: 'AT', value: (r) => formatTime(r.at) },
        { header: 'ACTOR', value: (r) => r.actor },
        { header: 'ACTION', value: (r) => r.action },
        { header: 'RUN', value: (r) => r.run_id ?? '-' },
        { header: 'TARGET', value: (r) => r.target ?? '-' },
        { header: 'REASON', value: (r) => r.reason },
        { header: 'DETAIL', value: (r) => formatJson(r.detail, 80) },
      ]),
    );
    return 0;
  },
});
