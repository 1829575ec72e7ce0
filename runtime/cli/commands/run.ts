import { createClient } from '../../client/client.js';
import { compensationText, runStatusLabel, shownAttemptStatus, skippedSteps } from '../../client/run-status-label.js';
import { loadStepDefs, runStepLabel, type StepDefsByVersion } from '../../client/run-step-label.js';
import { signalKey } from '../../client/send-event.js';
import { MAX_LISTED_CHILDREN, type RunDetails } from '../../client/run-details.js';
import { defineCommand } from '../command.js';
import { EFFECT_COLUMNS } from './effects.js';
import { formatFields, formatSection } from '../format-table.js';
import { formatJson, formatStoredError, formatTime, toJsonDocument } from '../../presentation/format-values.js';
import { formatWaitingFor } from '../../presentation/format-wait.js';

export const runCommand = defineCommand({
  name: 'run',
  summary: 'show one run with its steps, attempts, effects, waits and children',
  usage: '<run-id> [options]',
  description:
    'Shows a run and its three records: step results (a step skipped by its condition is marked), attempt\n' +
    'history and effect ledger; then what its sleep and waitFor steps waited or wait for, and the runs its\n' +
    `child and forEach steps started (the first ${MAX_LISTED_CHILDREN}).`,
  options: {},
  optionsHelp: '',
  positionals: { min: 1, max: 1, names: 'one run id' },
  async run({ positionals, json, io, openStore }) {
    const store = await openStore();
    const run = await createClient({ store }).getRun(positionals[0]!);
    io.out(json ? toJsonDocument(run) : formatRunDetails(run, await loadStepDefs(store.db, [run])));
    return 0;
  },
});

/** The human-readable view of a run, shared with `start --wait`; `defs` holds its version's step definitions. */
export function formatRunDetails(run: RunDetails, defs: StepDefsByVersion): string {
  const skipped = skippedSteps(run);
  const compensation = compensationText(run);
  const runAfter = formatTime(run.run_after);
  // A waitFor without match waits for a signal: an event whose correlation key is the run id.
  const signal = signalKey(run.id);
  const sections = [
    formatFields([
      ['run', run.id],
      ['workflow', `${run.workflow_name} v${run.workflow_version}`],
      ['status', runStatusLabel(run)],
      // Why the run undoes (or undid) its recorded effects (core 0013), and how that went.
      ...(compensation === undefined ? [] : [['compensation', compensation] as const]),
      ['waiting for', formatWaitingFor(run, { step: true })],
      ['dedupe key', run.dedupe_key ?? '-'],
      ...(run.debounce_key === null ? [] : [['debounce key', run.debounce_key] as const]),
      [
        'parent',
        run.parent_run_id === null
          ? '-'
          : `${run.parent_run_id}, step ${run.parent_step ?? '?'}, item ${run.parent_index ?? 0}`,
      ],
      ['current step', runStepLabel(run, defs)],
      ['input', formatJson(run.input)],
      ['output', formatJson(run.output)],
      ['error', formatStoredError(run.error)],
      ['lease', run.lease_owner === null ? '-' : `${run.lease_owner} until ${formatTime(run.lease_expires_at)}`],
      ['fencing token', String(run.fencing_token)],
      ['run after', run.status === 'waiting' && runAfter === 'infinity' ? 'when woken (no timer)' : runAfter],
      ['deadline', run.deadline_at === null ? '-' : `${formatTime(run.deadline_at)} (cancelled if unfinished then)`],
      ['created', formatTime(run.created_at)],
      ['updated', formatTime(run.updated_at)],
      ['finished', formatTime(run.finished_at)],
    ]),
  ];
  sections.push(
    formatSection(
      'Steps',
      run.steps,
      [
        { header: 'STEP', value: (s) => s.step_name },
        { header: 'KIND', value: (s) => s.kind },
        { header: 'ATTEMPT', value: (s) => String(s.attempt), align: 'right' },
        { header: 'KEY', value: (s) => s.idempotency_key ?? '-' },
        { header: 'COMMITTED', value: (s) => formatTime(s.created_at) },
        {
          header: 'OUTPUT',
          value: (s) => (s.skipped ? '(skipped: its condition was false)' : formatJson(s.output, 60)),
        },
      ],
      'none completed',
    ),
  );
  sections.push(
    formatSection('Attempts', run.attempts, [
      { header: 'STEP', value: (a) => a.step_name },
      { header: '#', value: (a) => String(a.attempt), align: 'right' },
      {
        header: 'STATUS',
        value: (a) => (shownAttemptStatus(a, skipped) === 'skipped' ? 'skipped (its condition was false)' : a.status),
      },
      { header: 'TOKEN', value: (a) => String(a.fencing_token), align: 'right' },
      { header: 'WORKER', value: (a) => a.worker_id },
      { header: 'STARTED', value: (a) => formatTime(a.started_at) },
      { header: 'FINISHED', value: (a) => formatTime(a.finished_at) },
      { header: 'NEXT ELIGIBLE', value: (a) => formatTime(a.next_eligible_at) },
      { header: 'ERROR', value: (a) => formatStoredError(a.error, 60) },
    ]),
  );
  sections.push(formatSection('Effects', run.effects, EFFECT_COLUMNS));
  sections.push(
    formatSection('Waits', run.waits, [
      { header: 'STEP', value: (w) => w.step_name },
      { header: 'KIND', value: (w) => (w.kind === 'event' && w.correlation_key === signal ? 'signal' : w.kind) },
      { header: 'EVENT', value: (w) => w.event_name ?? '-' },
      {
        header: 'KEY',
        value: (w) => (w.correlation_key === null || w.correlation_key === signal ? '-' : w.correlation_key),
      },
      { header: 'UNTIL', value: (w) => formatTime(w.until) },
      { header: 'SINCE', value: (w) => formatTime(w.created_at) },
      { header: 'RESOLVED', value: (w) => formatTime(w.resolved_at) },
    ]),
  );
  const capped = run.children.length >= MAX_LISTED_CHILDREN;
  sections.push(
    formatSection('Children', run.children, [
      { header: 'STEP', value: (c) => c.step },
      { header: 'ITEM', value: (c) => String(c.index), align: 'right' },
      { header: 'WORKFLOW', value: (c) => c.workflowName },
      { header: 'STATUS', value: (c) => c.status },
      { header: 'RUN', value: (c) => c.id },
    ]) +
      (capped
        ? `Only the first ${MAX_LISTED_CHILDREN} children are listed; there may be more. ` +
          `List them with \`ledgerflow runs --parent ${run.id} --limit 10000\`.\n`
        : ''),
  );
  return sections.join('\n');
}
