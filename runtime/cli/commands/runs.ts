import { createClient } from '../../client/client.js';
import { runStatusLabel } from '../../client/run-status-label.js';
import { loadStepDefs, runStepLabel } from '../../client/run-step-label.js';
import { RUN_STATUSES, type RunStatus, type WorkflowRunRow } from '../../store/tables.js';
import { defineCommand, integerOption, UsageError } from '../command.js';
import { formatTable } from '../format-table.js';
import { formatStoredError, formatTime, toJsonDocument } from '../../presentation/format-values.js';
import { formatWaitingFor } from '../../presentation/format-wait.js';

export const runsCommand = defineCommand({
  name: 'runs',
  summary: 'list runs, newest first',
  usage: '[--status <status>]... [--workflow <name>] [--parent <run-id>] [--dedupe-key <key>] [--limit <n>] [options]',
  description:
    'Lists workflow runs, newest first. WAITING FOR says what a waiting run waits for and until when (an event\n' +
    'and its key, a signal, a sleep, its children); PARENT names the run, step and item that started a child\n' +
    'run. A run undoing its recorded effects shows as e.g. "running, compensating (failure)".',
  options: {
    status: { type: 'string', multiple: true },
    workflow: { type: 'string' },
    parent: { type: 'string' },
    'dedupe-key': { type: 'string' },
    limit: { type: 'string' },
  },
  optionsHelp: `  --status <status>      pending, running, waiting, completed, failed, cancelled,
                         needs_reconciliation, compensated or compensation_failed (a
                         compensation failed for good: retry it); repeatable
  --workflow <name>      only runs of this workflow
  --parent <run-id>      only the children of this run
  --dedupe-key <key>     only the run(s) started with this dedupe key (one per workflow)
  --limit <n>            at most n runs (default 50)`,
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, json, io, openStore }) {
    const limit = integerOption('limit', values.limit);
    const unknown = (values.status ?? []).filter((s) => !(RUN_STATUSES as readonly string[]).includes(s));
    if (unknown.length > 0) {
      throw new UsageError(`Unknown --status ${unknown.join(', ')}. Use one of: ${RUN_STATUSES.join(', ')}.`);
    }
    const client = createClient({ store: await openStore() });
    const runs = await client.listRuns({
      ...(values.status !== undefined ? { status: values.status as RunStatus[] } : {}),
      ...(values.workflow !== undefined ? { workflow: values.workflow } : {}),
      ...(values.parent !== undefined ? { parentRunId: values.parent } : {}),
      ...(values['dedupe-key'] !== undefined ? { dedupeKey: values['dedupe-key'] } : {}),
      ...(limit !== undefined ? { limit } : {}),
    });
    if (json) {
      io.out(toJsonDocument(runs));
      return 0;
    }
    if (runs.length === 0) {
      io.out('No runs.\n');
      return 0;
    }
    const defs = await loadStepDefs(client.store.db, runs);
    io.out(
      formatTable(runs, [
        { header: 'RUN', value: (r) => r.id },
        { header: 'WORKFLOW', value: (r) => `${r.workflow_name} v${r.workflow_version}` },
        { header: 'STATUS', value: (r) => runStatusLabel(r) },
        { header: 'STEP', value: (r) => runStepLabel(r, defs) },
        { header: 'WAITING FOR', value: (r) => formatWaitingFor(r) },
        { header: 'CREATED', value: (r) => formatTime(r.created_at) },
        { header: 'FINISHED', value: (r) => formatTime(r.finished_at) },
        { header: 'PARENT', value: formatParent },
        { header: 'ERROR', value: (r) => formatStoredError(r.error, 60) },
      ]),
    );
    return 0;
  },
});

/** `<parent run id> <step>[<index>]` for a child run, `-` otherwise. */
function formatParent(run: Pick<WorkflowRunRow, 'parent_run_id' | 'parent_step' | 'parent_index'>): string {
  return run.parent_run_id === null ? '-' : `${run.parent_run_id} ${run.parent_step ?? '?'}[${run.parent_index ?? 0}]`;
}
