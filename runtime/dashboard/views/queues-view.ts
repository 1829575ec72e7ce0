import type { QueueSummary } from '../../client/queues.js';
import type { ScheduleSummary } from '../../client/schedules.js';
import { formatLimits } from '../../presentation/format-limits.js';
import { html, type Html } from '../html.js';
import { formatStoredError, formatTime, shortId } from './format.js';
import { page, statusBadge, type PageContext } from './layout.js';

export function queuesView(
  context: PageContext,
  queues: readonly QueueSummary[],
  schedules: readonly ScheduleSummary[],
  notice?: string,
): Html {
  const { base } = context;
  const toggle = (kind: 'queues' | 'schedules', name: string, paused: boolean): Html =>
    html`<a href="${base}/${kind}/${encodeURIComponent(name)}/${paused ? 'resume' : 'pause'}">${paused ? 'Resume…' : 'Pause…'}</a>`;
  const body = html`${notice === undefined ? '' : html`<div class="ok" id="notice">${notice}</div>`}<h1>Queues</h1>
${
  queues.length === 0
    ? html`<p class="muted">No queue registered (workers register the queues of the workflows they serve).</p>`
    : html`<table id="queues"><thead><tr><th>Queue</th><th>Limits</th><th>In flight</th><th>Waiting</th><th>Oldest waiting since</th><th>Rate-limited until</th><th>Paused</th><th></th></tr></thead><tbody>
${queues.map(
  (
    q,
  ) => html`<tr><td>${q.name}</td><td>${formatLimits(q.limits)}</td><td class="num">${q.inFlight}</td><td class="num">${q.waiting}</td><td>${formatTime(q.oldestWaitingSince)}</td>
<td>${formatTime(q.rateLimitedUntil)}</td><td>${q.paused ? 'paused' : 'no'}</td><td>${toggle('queues', q.name, q.paused)}</td></tr>`,
)}</tbody></table>`
}
<h1>Schedules</h1>
${
  schedules.length === 0
    ? html`<p class="muted">No schedule registered.</p>`
    : html`<table id="schedules"><thead><tr><th>Schedule</th><th>Cron</th><th>Workflow</th><th>Paused</th><th>Next ticks (UTC)</th><th>Last run</th><th>Last error</th><th></th></tr></thead><tbody>
${schedules.map(
  (
    s,
  ) => html`<tr><td>${s.name}</td><td><code>${s.cron}</code> <span class="muted">${s.timezone}</span></td><td>${s.workflowName} v${s.workflowVersion}</td>
<td>${s.paused ? 'paused' : 'no'}</td><td>${s.nextTicks.map((t) => formatTime(t)).join(', ')}</td>
<td>${s.lastRunId === null ? '-' : html`<a href="${base}/runs/${s.lastRunId}"><code>${shortId(s.lastRunId)}</code></a> ${s.lastRunStatus === null ? '' : statusBadge(s.lastRunStatus)}`}</td>
<td>${s.lastError === null ? '' : formatStoredError(s.lastError, 120)}</td><td>${toggle('schedules', s.name, s.paused)}</td></tr>`,
)}</tbody></table>`
}`;
  return page(context, 'queues', 'Queues and schedules', body);
}
