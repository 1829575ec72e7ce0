import { createClient } from '../../client/client.js';
import type { RunDetails } from '../../client/run-details.js';
import { defineCommand } from '../command.js';
import { formatFields, formatTable } from '../format-table.js';
import { formatJson, formatStoredError, formatTime, toJsonDocument } from '../format-values.js';

export const runCommand = defineCommand({
  name: 'run',
  summary: 'show one run with its steps, attempts and effects',
  usage: '<run-id> [options]',
  description: 'Shows a run and its three records: step results, attempt history and effect ledger.',
  options: {},
  optionsHelp: '',
  positionals: { min: 1, max: 1, names: 'one run id' },
  async run({ positionals, json, io, openStore }) {
    const client = createClient({ store: await openStore() });
    const run = await client.getRun(positionals[0]!);
    io.out(json ? toJsonDocument(run) : formatRunDetails(run));
    return 0;
  },
});

/** The human-readable view of a run, shared with `start --wait`. */
export function formatRunDetails(run: RunDetails): string {
  const sections = [
    formatFields([
      ['run', run.id],
      ['workflow', `${run.workflow_name} v${run.workflow_version}`],
      ['status', run.status],
      ['dedupe key', run.dedupe_key ?? '-'],
      ['current step', String(run.current_step)],
      ['input', formatJson(run.input)],
      ['output', formatJson(run.output)],
      ['error', formatStoredError(run.error)],
      ['lease', run.lease_owner === null ? '-' : `${run.lease_owner} until ${formatTime(run.lease_expires_at)}`],
      ['fencing token', String(run.fencing_token)],
      ['run after', formatTime(run.run_after)],
      ['created', formatTime(run.created_at)],
      ['updated', formatTime(run.updated_at)],
      ['finished', formatTime(run.finished_at)],
    ]),
  ];
  sections.push(
    run.steps.length === 0
      ? 'Steps: none completed\n'
      : 'Steps:\n' +
          formatTable(run.steps, [
            { header: 'STEP', value: (s) => s.step_name },
            { header: 'KIND', value: (s) => s.kind },
            { header: 'ATTEMPT', value: (s) => String(s.attempt), align: 'right' },
            { header: 'KEY', value: (s) => s.idempotency_key ?? '-' },
            { header: 'COMMITTED', value: (s) => formatTime(s.created_at) },
            { header: 'OUTPUT', value: (s) => formatJson(s.output, 60) },
          ]),
  );
  sections.push(
    run.attempts.length === 0
      ? 'Attempts: none\n'
      : 'Attempts:\n' +
          formatTable(run.attempts, [
            { header: 'STEP', value: (a) => a.step_name },
            { header: '#', value: (a) => String(a.attempt), align: 'right' },
            { header: 'STATUS', value: (a) => a.status },
            { header: 'TOKEN', value: (a) => String(a.fencing_token), align: 'right' },
            { header: 'WORKER', value: (a) => a.worker_id },
            { header: 'STARTED', value: (a) => formatTime(a.started_at) },
            { header: 'FINISHED', value: (a) => formatTime(a.finished_at) },
            { header: 'NEXT ELIGIBLE', value: (a) => formatTime(a.next_eligible_at) },
            { header: 'ERROR', value: (a) => formatStoredError(a.error, 60) },
          ]),
  );
  sections.push(
    run.effects.length === 0
      ? 'Effects: none\n'
      : 'Effects:\n' +
          formatTable(run.effects, [
            { header: 'STEP', value: (e) => e.step_name },
            { header: 'KEY', value: (e) => e.idempotency_key },
            { header: 'KIND', value: (e) => e.kind },
            { header: 'STATUS', value: (e) => e.status },
            { header: 'ATTEMPT', value: (e) => String(e.attempt), align: 'right' },
            { header: 'INTENT', value: (e) => formatTime(e.intent_at) },
            { header: 'RECORDED', value: (e) => formatTime(e.recorded_at) },
            { header: 'RESOLUTION', value: (e) => e.resolution ?? '-' },
          ]),
  );
  return sections.join('\n');
}
