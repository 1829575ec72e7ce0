import {
  compensationText,
  shownAttemptStatus,
  skippedSteps,
  type ShownAttemptStatus,
} from '../../client/run-status-label.js';
import { runStepLabel, type StepDefsByVersion } from '../../client/run-step-label.js';
import { signalKey } from '../../client/send-event.js';
import { MAX_LISTED_CHILDREN, type RunDetails } from '../../client/run-details.js';
import { formatWaitingFor } from '../../presentation/format-wait.js';
import { FINAL_RUN_STATUSES, type OperatorActionRow, type StepAttemptRow } from '../../store/tables.js';
import { runStatusIn } from '../../store/state-machines.js';
import { html, type Html } from '../html.js';
import { auditTable } from './audit-view.js';
import { errorBlock, formatStoredError, formatTime, horizonText, jsonBlock, shortId } from './format.js';
import { page, runStatusBadge, statusBadge, type PageContext } from './layout.js';

export interface RunViewData {
  readonly run: RunDetails;
  /** The time the page was read (the timeline's right edge for attempts still running). */
  readonly now: Date;
  readonly audit: readonly OperatorActionRow[];
  /** Its version's step definitions, to name the step it is at. */
  readonly defs: StepDefsByVersion;
  /** A line to show above the run, e.g. after an action. */
  readonly notice?: string;
}

export function runView(context: PageContext, data: RunViewData): Html {
  const { run, now } = data;
  const { base } = context;
  const skipped = skippedSteps(run);
  const compensation = compensationText(run);
  const signal = signalKey(run.id);
  const actions = html`<p class="actions">${
    // A run that is compensating is not cancelled (it is undoing what it did).
    runStatusIn(FINAL_RUN_STATUSES, run.status) || run.compensation !== null
      ? ''
      : html`<a href="${base}/runs/${run.id}/cancel"><button class="danger" type="button">Cancel run…</button></a> `
  }${run.status === 'failed' ? html`<a href="${base}/runs/${run.id}/retry"><button class="go" type="button">Retry from the failed step…</button></a>` : ''}${
    run.status === 'compensation_failed'
      ? html`<a href="${base}/runs/${run.id}/retry"><button class="go" type="button">Retry the failed compensation…</button></a>`
      : ''
  }</p>`;
  const body = html`<h1>Run <code>${run.id}</code> ${runStatusBadge(run)}</h1>
${data.notice === undefined ? '' : html`<div class="ok" id="notice">${data.notice}</div>`}
${actions}
<dl>
<dt>workflow</dt><dd><a href="${context.home}?workflow=${encodeURIComponent(run.workflow_name)}">${run.workflow_name}</a> v${run.workflow_version}</dd>
<dt>waiting for</dt><dd>${formatWaitingFor(run, { step: true })}</dd>
<dt>dedupe key</dt><dd>${run.dedupe_key ?? '-'}</dd>
<dt>parent</dt><dd>${run.parent_run_id === null ? '-' : html`<a href="${base}/runs/${run.parent_run_id}">${run.parent_run_id}</a>, step ${run.parent_step ?? '?'}, item ${run.parent_index ?? 0}`}</dd>
<dt>current step</dt><dd>${runStepLabel(run, data.defs)}</dd>
${compensation === undefined ? '' : html`<dt>compensation</dt><dd>${compensation}</dd>`}
<dt>lease</dt><dd>${run.lease_owner === null ? '-' : `${run.lease_owner} until ${formatTime(run.lease_expires_at)}`}</dd>
<dt>deadline</dt><dd>${formatTime(run.deadline_at)}</dd>
<dt>created</dt><dd>${formatTime(run.created_at)}</dd><dt>updated</dt><dd>${formatTime(run.updated_at)}</dd><dt>finished</dt><dd>${formatTime(run.finished_at)}</dd>
</dl>
<h2>Timeline</h2>
${timeline(run.attempts, now, skipped)}
<h2>Effect ledger</h2>
${
  run.effects.length === 0
    ? html`<p class="muted">No ledger rows: no transactional or external step has run.</p>`
    : html`<table id="ledger"><thead><tr><th>Step</th><th>Key</th><th>Kind</th><th>Status</th><th>Request hash</th><th>Attempt</th><th>Resolution</th><th>Intent at</th><th>Recorded at</th><th>Horizon</th><th></th></tr></thead><tbody>
${run.effects.map(
  (
    e,
  ) => html`<tr><td>${e.step_name}</td><td><code>${e.idempotency_key}</code></td><td>${e.kind}</td><td>${statusBadge(e.status)}</td>
<td title="${e.request_hash}"><code>${e.request_hash.slice(0, 12)}</code></td><td class="num">${e.attempt}</td><td>${e.resolution ?? '-'}</td>
<td>${formatTime(e.intent_at)}</td><td>${formatTime(e.recorded_at)}</td><td>${e.status === 'intent' ? horizonText(e.reconcile_after, now) : '-'}</td>
<td>${e.status === 'intent' ? html`<a href="${base}/runs/${run.id}/effects/${encodeURIComponent(e.step_name)}/resolve">Resolve…</a>` : ''}</td></tr>`,
)}</tbody></table>`
}
<h2>Attempts</h2>
${
  run.attempts.length === 0
    ? html`<p class="muted">No attempts yet.</p>`
    : html`<table id="attempts"><thead><tr><th>Step</th><th>#</th><th>Status</th><th>Worker</th><th>Started</th><th>Finished</th><th>Next eligible</th><th>Error</th></tr></thead><tbody>
${run.attempts.map(
  (
    a,
  ) => html`<tr><td>${a.step_name}</td><td class="num">${a.attempt}</td><td>${attemptBadge(shownAttemptStatus(a, skipped))}</td><td>${a.worker_id}</td>
<td>${formatTime(a.started_at)}</td><td>${formatTime(a.finished_at)}</td><td>${formatTime(a.next_eligible_at)}</td><td>${formatStoredError(a.error)}</td></tr>`,
)}</tbody></table>`
}
<h2>Step results</h2>
${
  run.steps.length === 0
    ? html`<p class="muted">No step completed yet.</p>`
    : html`<table id="steps"><thead><tr><th>Step</th><th>Kind</th><th>Attempt</th><th>Key</th><th>Committed</th><th>Output</th></tr></thead><tbody>
${run.steps.map(
  (
    s,
  ) => html`<tr><td>${s.step_name}</td><td>${s.kind}</td><td class="num">${s.attempt}</td><td>${s.idempotency_key ?? '-'}</td><td>${formatTime(s.created_at)}</td>
<td>${s.skipped ? html`<span class="muted">skipped: its condition was false</span>` : jsonBlock(s.output)}</td></tr>`,
)}</tbody></table>`
}
<h2>Waits</h2>
${
  run.waits.length === 0
    ? html`<p class="muted">None.</p>`
    : html`<table id="waits"><thead><tr><th>Step</th><th>Kind</th><th>Event</th><th>Key</th><th>Until</th><th>Since</th><th>Resolved</th></tr></thead><tbody>
${run.waits.map(
  (
    w,
  ) => html`<tr><td>${w.step_name}</td><td>${w.kind === 'event' && w.correlation_key === signal ? 'signal' : w.kind}</td><td>${w.event_name ?? '-'}</td>
<td>${w.correlation_key === null || w.correlation_key === signal ? '-' : w.correlation_key}</td><td>${formatTime(w.until)}</td><td>${formatTime(w.created_at)}</td><td>${formatTime(w.resolved_at)}</td></tr>`,
)}</tbody></table>`
}
<h2>Children</h2>
${
  run.children.length === 0
    ? html`<p class="muted">None.</p>`
    : html`<table id="children"><thead><tr><th>Step</th><th>Item</th><th>Workflow</th><th>Status</th><th>Run</th></tr></thead><tbody>
${run.children.map(
  (c) =>
    html`<tr><td>${c.step}</td><td class="num">${c.index}</td><td>${c.workflowName}</td><td>${statusBadge(c.status)}</td><td><a href="${base}/runs/${c.id}"><code>${shortId(c.id)}</code></a></td></tr>`,
)}</tbody></table>${run.children.length >= MAX_LISTED_CHILDREN ? html`<p class="muted">Only the first ${MAX_LISTED_CHILDREN} are listed; <code>ledgerflow runs --parent ${run.id}</code> lists them all.</p>` : ''}`
}
<h2>Input</h2>${jsonBlock(run.input)}
<h2>Output</h2>${jsonBlock(run.output)}
<h2>Error</h2><div id="error">${errorBlock(run.error)}</div>
<h2>Operator actions on this run</h2>${auditTable(context, data.audit)}`;
  return page(context, 'runs', `Run ${shortId(run.id)}`, body);
}

const ROW = 22;
const LABEL = 180;
const WIDTH = 980;
const ATTEMPT_FILL: Readonly<Record<ShownAttemptStatus, string>> = {
  succeeded: '#3a9d5d',
  skipped: '#c4cad1',
  failed: '#d0453a',
  abandoned: 'url(#crash)',
  suspended: '#9b8fd6',
  running: '#3b7dd8',
};

/** An attempt's status label; a skipped step's says why. */
function attemptBadge(status: ShownAttemptStatus): Html {
  return status === 'skipped'
    ? html`<span class="st st-skipped" title="its condition was false: it did not run">skipped</span>`
    : statusBadge(status);
}

/**
 * The attempts on one time axis, a row per step (in the order the steps first ran), a bar per
 * attempt from its start to its end (now, while running). A retry is a second bar on its step's
 * row; a failure is red; an attempt abandoned because its worker's lease ran out (a crash) is
 * hatched orange; a parked attempt (the run waited) is violet; a step its condition skipped (in
 * `skipped`) is grey.
 */
export function timeline(attempts: readonly StepAttemptRow[], now: Date, skipped: ReadonlySet<string>): Html {
  if (attempts.length === 0) return html`<p class="muted">No attempts yet.</p>`;
  const steps = [...new Set(attempts.map((a) => a.step_name))];
  const start = Math.min(...attempts.map((a) => a.started_at.getTime()));
  const end = Math.max(...attempts.map((a) => (a.finished_at ?? now).getTime()), start + 1);
  const span = end - start;
  const chart = WIDTH - LABEL - 20;
  const x = (t: number): number => LABEL + ((t - start) / span) * chart;
  const height = steps.length * ROW + 30;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => ({ at: LABEL + f * chart, label: `+${formatDuration(f * span)}` }));
  const bars = attempts.map((a) => {
    const row = steps.indexOf(a.step_name);
    const status = shownAttemptStatus(a, skipped);
    const from = x(a.started_at.getTime());
    const to = x((a.finished_at ?? now).getTime());
    const detail = `${a.step_name} attempt ${a.attempt}: ${status === 'skipped' ? 'skipped (its condition was false)' : status}, ${formatDuration((a.finished_at ?? now).getTime() - a.started_at.getTime())}${
      a.error === null ? '' : ` — ${formatStoredError(a.error, 300)}`
    }`;
    return html`<rect class="bar" data-step="${a.step_name}" data-attempt="${a.attempt}" data-status="${status}" x="${from.toFixed(1)}" y="${row * ROW + 4}" width="${Math.max(3, to - from).toFixed(1)}" height="${ROW - 8}" rx="2" fill="${ATTEMPT_FILL[status]}" stroke="${a.status === 'abandoned' ? '#c26a00' : 'none'}"><title>${detail}</title></rect>`;
  });
  return html`<svg id="timeline" role="img" aria-label="Attempts on a time axis" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" style="background:#fff;border:1px solid #e3e6ea">
<defs><pattern id="crash" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fde3c4"/><rect width="3" height="6" fill="#f08c00"/></pattern></defs>
${steps.map((step, i) => html`<text x="6" y="${i * ROW + 15}">${step}</text><line x1="${LABEL}" x2="${WIDTH - 20}" y1="${i * ROW + ROW}" y2="${i * ROW + ROW}" stroke="#eef0f3"/>`)}
${ticks.map((t) => html`<line x1="${t.at.toFixed(1)}" x2="${t.at.toFixed(1)}" y1="0" y2="${steps.length * ROW}" stroke="#e3e6ea"/><text x="${(t.at - 12).toFixed(1)}" y="${steps.length * ROW + 16}" fill="#6b7682">${t.label}</text>`)}
${bars}
</svg>
<p class="muted">Bars: ${statusBadge('succeeded')} ${statusBadge('failed')} (retried) ${statusBadge('abandoned')} (crashed: lease lost) ${statusBadge('suspended')} (parked: the run waited) ${statusBadge('running')} ${attemptBadge('skipped')} (its condition was false). Hover a bar for its error.</p>`;
}

function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${(ms / 60_000).toFixed(1)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}
