import { html, type Html } from '../html.js';
import { encodeIntentCursor } from '../list-params.js';
import type { OpenIntentCursor, OpenIntentRow } from '../open-intents.js';
import { formatTime, horizonText, shortId } from './format.js';
import { page, statusBadge, type PageContext } from './layout.js';

export interface IntentsViewData {
  readonly rows: readonly OpenIntentRow[];
  readonly next: OpenIntentCursor | undefined;
  readonly first: boolean;
  readonly limit: number;
}

export function intentsView(context: PageContext, data: IntentsViewData): Html {
  const { base } = context;
  const body = html`<h1>Open intents</h1>
<p class="muted">External calls whose outcome is not known yet, oldest first. Before its horizon a call may still be in flight;
after it the reconciler asks the provider, and an operator may resolve it by hand (found, with the provider's result, or not found).</p>
${
  data.rows.length === 0
    ? html`<p class="muted">No open intents.</p>`
    : html`<table id="intents"><thead><tr><th>Intent at (UTC)</th><th>Run</th><th>Workflow</th><th>Run status</th><th>Step</th><th>Key</th><th>Attempt</th><th>Horizon</th><th>Asked</th><th></th></tr></thead><tbody>
${data.rows.map(
  (
    r,
  ) => html`<tr><td>${formatTime(r.intent_at)}</td><td><a href="${base}/runs/${r.run_id}" title="${r.run_id}"><code>${shortId(r.run_id)}</code></a></td>
<td>${r.workflow_name} <span class="muted">v${r.workflow_version}</span></td><td>${statusBadge(r.run_status)}</td><td>${r.step_name}</td><td><code>${r.idempotency_key}</code></td>
<td class="num">${r.attempt}</td><td title="${formatTime(r.reconcile_after)}">${horizonText(r.reconcile_after, r.now)}</td><td class="num">${r.reconcile_attempts}</td>
<td><a href="${base}/runs/${r.run_id}/effects/${encodeURIComponent(r.step_name)}/resolve">Resolve…</a></td></tr>`,
)}</tbody></table>`
}
<p class="pager">${data.first ? '' : html`<a href="${base}/intents">« first page</a> `}${
    data.next !== undefined
      ? html`<a id="next-page" href="${base}/intents?after=${encodeIntentCursor(data.next)}${data.limit === 50 ? '' : `&limit=${data.limit}`}">next page »</a>`
      : ''
  }</p>`;
  return page(context, 'intents', 'Open intents', body);
}
