import { runStepLabel, type StepDefsByVersion } from '../../client/run-step-label.js';
import { RUN_STATUSES, type RunStatus } from '../../store/tables.js';
import { html, type Html } from '../html.js';
import { encodeRunCursor, type RunListParams } from '../list-params.js';
import { STATUS_COUNT_CAP, type RunPage } from '../../client/run-list.js';
import { formatStoredError, formatTime, shortId } from './format.js';
import { page, runStatusBadge, statusBadge, type PageContext } from './layout.js';

export interface RunsViewData {
  readonly params: RunListParams;
  readonly page: RunPage;
  readonly counts: ReadonlyMap<RunStatus, number>;
  /** The step definitions of the listed runs' versions, to name the step each is at. */
  readonly defs: StepDefsByVersion;
  /** Workflow names to offer in the filter. */
  readonly workflows: readonly string[];
}

export function runsView(context: PageContext, data: RunsViewData): Html {
  const { filter, limit } = data.params;
  const { base, home } = context;
  const query = (overrides: Record<string, string | readonly string[] | undefined>): string => {
    const params = new URLSearchParams();
    const values: Record<string, string | readonly string[] | undefined> = {
      status: filter.statuses,
      workflow: filter.workflow,
      version: filter.version?.toString(),
      from: filter.createdFrom?.toISOString(),
      to: filter.createdBefore?.toISOString(),
      key: filter.dedupeKey?.value,
      match: filter.dedupeKey?.match,
      limit: limit === 50 ? undefined : String(limit),
      ...overrides,
    };
    for (const [name, value] of Object.entries(values)) {
      if (value === undefined) continue;
      for (const v of typeof value === 'string' ? [value] : value) params.append(name, v);
    }
    const text = params.toString();
    return text === '' ? home : `${home}?${text}`;
  };
  const count = (status: RunStatus): string => {
    const n = data.counts.get(status) ?? 0;
    return n > STATUS_COUNT_CAP ? `${STATUS_COUNT_CAP.toLocaleString('en')}+` : n.toLocaleString('en');
  };
  const body = html`<h1>Runs</h1>
<form class="filters" method="get" action="${home}">
  <label>Status<select name="status"><option value="">any</option>${RUN_STATUSES.map(
    (s) =>
      html`<option value="${s}" ${filter.statuses.length === 1 && filter.statuses[0] === s ? 'selected' : ''}>${s}</option>`,
  )}</select></label>
  <label>Workflow<input name="workflow" list="workflow-names" value="${filter.workflow ?? ''}" size="18"></label>
  <datalist id="workflow-names">${data.workflows.map((w) => html`<option value="${w}">`)}</datalist>
  <label>Version<input name="version" value="${filter.version ?? ''}" size="4"></label>
  <label>Created from (UTC)<input name="from" type="datetime-local" value="${inputTime(filter.createdFrom)}"></label>
  <label>to<input name="to" type="datetime-local" value="${inputTime(filter.createdBefore)}"></label>
  <label>Dedupe key<input name="key" value="${filter.dedupeKey?.value ?? ''}" size="18"></label>
  <label>Match<select name="match"><option value="exact">exact</option><option value="prefix" ${filter.dedupeKey?.match === 'prefix' ? 'selected' : ''}>prefix</option></select></label>
  <button type="submit">Filter</button> <a href="${home}">clear</a>
</form>
<p class="counts" title="Counted per status up to ${STATUS_COUNT_CAP.toLocaleString('en')} from the index, for the workflow, version and time filters">${RUN_STATUSES.map(
    (s) =>
      html`<a href="${query({ status: [s], after: undefined })}">${statusBadge(s)} <span data-count="${s}">${count(s)}</span></a>`,
  )}</p>
${
  data.page.rows.length === 0
    ? html`<p class="muted">No runs match.</p>`
    : html`<table id="runs"><thead><tr><th>Run</th><th>Workflow</th><th>Status</th><th>Dedupe key</th><th>Step</th><th>Created (UTC)</th><th>Finished</th><th>Error</th></tr></thead><tbody>
${data.page.rows.map(
  (r) => html`<tr>
<td><a href="${base}/runs/${r.id}" title="${r.id}"><code>${shortId(r.id)}</code></a>${r.parent_run_id === null ? '' : html` <span class="muted" title="child of ${r.parent_run_id}">child</span>`}</td>
<td>${r.workflow_name} <span class="muted">v${r.workflow_version}</span></td><td>${runStatusBadge(r)}</td>
<td>${r.dedupe_key ?? ''}</td><td>${runStepLabel(r, data.defs)}</td><td>${formatTime(r.created_at)}</td><td>${formatTime(r.finished_at)}</td>
<td>${r.error === null ? '' : formatStoredError(r.error, 80)}</td></tr>`,
)}</tbody></table>`
}
<p class="pager">${data.params.cursor !== undefined ? html`<a href="${query({ after: undefined })}">« first page</a> ` : ''}${
    data.page.next !== undefined
      ? html`<a id="next-page" href="${query({ after: encodeRunCursor(data.page.next) })}">next page »</a>`
      : ''
  } <span class="muted">${filter.dedupeKey !== undefined ? 'in key order' : 'newest first'}, ${limit} per page</span></p>`;
  return page(context, 'runs', 'Runs', body);
}

/** A time as a datetime-local field's value (UTC, minutes). */
function inputTime(time: Date | undefined): string {
  return time === undefined ? '' : time.toISOString().slice(0, 16);
}
