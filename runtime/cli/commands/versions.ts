import { createClient } from '../../client/client.js';
import { defineCommand } from '../command.js';
import { formatTable } from '../format-table.js';
import { formatTime, toJsonDocument } from '../../presentation/format-values.js';
import { loadWorkflowsModule } from '../load-workflows.js';

export const versionsCommand = defineCommand({
  name: 'versions',
  summary: 'list migrated workflow versions and their unfinished runs',
  usage: '[--workflows <module>] [options]',
  description:
    'Lists every migrated workflow version with its runs counted by status. A version with unfinished runs\n' +
    '(pending, running, waiting, needs_reconciliation) must stay declared and served by a worker until they finish.\n' +
    'With --workflows, also shows whether that module has handlers for each version; exits 1 if a version\n' +
    'with unfinished runs has none there.',
  options: {
    workflows: { type: 'string' },
  },
  optionsHelp: `  --workflows <module>   module exporting \`workflows\` (the worker's): which versions it serves`,
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, json, io, openStore }) {
    const served =
      values.workflows === undefined
        ? undefined
        : new Set(
            (await loadWorkflowsModule(values.workflows))
              .filter((entry) => 'handlers' in entry)
              .map((entry) => ('workflow' in entry ? `${entry.workflow.name}@${entry.workflow.version}` : '')),
          );
    const versions = await createClient({ store: await openStore() }).listVersions();
    const rows = versions.map((v) => ({
      ...v,
      ...(served !== undefined ? { handlers: served.has(`${v.workflowName}@${v.version}`) } : {}),
    }));
    const stranded = rows.filter((v) => v.handlers === false && v.unfinished > 0);
    if (json) {
      io.out(toJsonDocument(rows));
    } else if (rows.length === 0) {
      io.out('No workflow versions are migrated.\n');
    } else {
      io.out(
        formatTable(rows, [
          { header: 'WORKFLOW', value: (v) => v.workflowName },
          { header: 'VERSION', value: (v) => String(v.version), align: 'right' },
          { header: 'UNFINISHED', value: (v) => String(v.unfinished), align: 'right' },
          { header: 'PENDING', value: (v) => String(v.pending), align: 'right' },
          { header: 'RUNNING', value: (v) => String(v.running), align: 'right' },
          { header: 'WAITING', value: (v) => String(v.waiting), align: 'right' },
          { header: 'PARKED', value: (v) => String(v.needsReconciliation), align: 'right' },
          { header: 'COMPLETED', value: (v) => String(v.completed), align: 'right' },
          { header: 'FAILED', value: (v) => String(v.failed), align: 'right' },
          { header: 'CANCELLED', value: (v) => String(v.cancelled), align: 'right' },
          ...(served !== undefined
            ? [{ header: 'HANDLERS', value: (v: (typeof rows)[number]) => (v.handlers ? 'yes' : 'no') }]
            : []),
          { header: 'MIGRATED', value: (v) => formatTime(v.migratedAt) },
        ]),
      );
      for (const v of stranded) {
        io.out(
          `${v.workflowName} v${v.version} has ${v.unfinished} unfinished run(s) and no handlers in ${values.workflows}.\n`,
        );
      }
    }
    return stranded.length > 0 ? 1 : 0;
  },
});
