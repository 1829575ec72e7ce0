import { html, type Html } from '../html.js';
import type { OperatorActionRow } from '../../store/tables.js';
import { formatTime, shortId } from './format.js';
import { page, type PageContext } from './layout.js';

export function auditTable(context: PageContext, entries: readonly OperatorActionRow[]): Html {
  if (entries.length === 0) return html`<p class="muted">No operator actions recorded.</p>`;
  return html`<table class="audit"><thead><tr><th>At (UTC)</th><th>Actor</th><th>Action</th><th>Target</th><th>Reason</th><th>Detail</th></tr></thead><tbody>
${entries.map(
  (e) => html`<tr><td>${formatTime(e.at)}</td><td>${e.actor}</td><td>${e.action}</td>
<td>${e.run_id !== null ? html`<a href="${context.base}/runs/${e.run_id}"><code>${shortId(e.run_id)}</code></a>${e.target === null ? '' : html` <code>${e.target}</code>`}` : (e.target ?? '')}</td>
<td>${e.reason}</td><td><code>${e.detail === null || e.detail === undefined ? '' : JSON.stringify(e.detail)}</code></td></tr>`,
)}</tbody></table>`;
}

export function auditView(context: PageContext, entries: readonly OperatorActionRow[], limit: number): Html {
  return page(
    context,
    'audit',
    'Audit',
    html`<h1>Operator actions</h1><p class="muted">Newest first, the last ${limit}. Every action the dashboard or the client takes is written here with its actor and reason, in the transaction that makes the change.</p>
<div id="audit">${auditTable(context, entries)}</div>`,
  );
}
