import { compensatingReason } from '../../client/run-status-label.js';
import type { CompensationReason, RunStatus } from '../../store/tables.js';
import { Html, html, type HtmlValue } from '../html.js';

/** Where the dashboard is mounted ('' at the root) and how a page links within it. */
export interface PageContext {
  readonly base: string;
  /** The runs list: `/`, or the base path itself when mounted under one. */
  readonly home: string;
  readonly actor: string;
  /** The CSRF token of this browser's session, for every form that POSTs. */
  readonly csrf: string;
}

export type Section = 'runs' | 'intents' | 'queues' | 'audit';

const SECTIONS: ReadonlyArray<readonly [Section, string, string]> = [
  ['runs', 'Runs', ''],
  ['intents', 'Open intents', '/intents'],
  ['queues', 'Queues & schedules', '/queues'],
  ['audit', 'Audit', '/audit'],
];

/** Kept small and inline: the dashboard ships no assets and runs no build. */
const STYLE = `
*{box-sizing:border-box}body{margin:0;font:14px/1.4 system-ui,sans-serif;color:#1d232b;background:#f6f7f9}
header{background:#1d232b;color:#fff;padding:8px 16px;display:flex;gap:18px;align-items:center}
header a{color:#cdd6e0;text-decoration:none}header a.on{color:#fff;font-weight:600}header .who{margin-left:auto;color:#8b97a5;font-size:12px}
main{padding:16px;max-width:1280px}h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;margin:20px 0 8px}
table{border-collapse:collapse;width:100%;background:#fff}th,td{text-align:left;padding:4px 8px;border-bottom:1px solid #e3e6ea;vertical-align:top}
th{font-weight:600;background:#eef0f3;font-size:12px}td.num{text-align:right}code,pre{font:12px ui-monospace,monospace}
pre{background:#fff;border:1px solid #e3e6ea;padding:8px;overflow:auto;max-height:240px;margin:0}
.st{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;background:#e3e6ea}
.st-completed,.st-succeeded,.st-recorded{background:#d3f0dc}.st-failed{background:#f8d4d4}.st-abandoned{background:#fde3c4}
.st-running,.st-intent{background:#d6e6fb}.st-waiting,.st-suspended,.st-pending{background:#ece7f9}.st-needs_reconciliation{background:#fbe8a6}
.st-cancelled,.st-released{background:#e3e6ea}.st-skipped{background:#eef0f3;color:#6b7682}
.st-compensated{background:#d4ecec}.st-compensation_failed{background:#f8d4d4}.st-compensating{background:#fde3c4}
form.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:end;margin-bottom:12px}form.filters label{display:flex;flex-direction:column;font-size:12px}
input,select,textarea,button{font:inherit}textarea{width:100%;min-height:90px;font:12px ui-monospace,monospace}
.counts a{margin-right:10px}.error{background:#f8d4d4;border:1px solid #e09a9a;padding:8px;margin:8px 0;white-space:pre-wrap}
.error-text{background:#fff;border:1px solid #e09a9a;border-left:4px solid #d0453a;padding:8px;margin:0 0 6px;white-space:pre-wrap}
details summary{cursor:pointer;color:#1f5fbf;font-size:12px}details pre{margin-top:6px}
.ok{background:#d3f0dc;border:1px solid #8fc9a2;padding:8px;margin:8px 0}.muted{color:#6b7682}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}dt{color:#6b7682}dd{margin:0}
.actions form{display:inline}button.danger{background:#b42318;color:#fff;border:0;padding:4px 10px;border-radius:4px}
button.go{background:#1f5fbf;color:#fff;border:0;padding:4px 10px;border-radius:4px}.pager{margin:10px 0}
svg text{font:11px system-ui,sans-serif}table.audit td:last-child{word-break:break-all;max-width:420px}`;

/** A constant of this file, so markup rather than text. */
const STYLE_MARKUP = new Html(STYLE);

export function page(context: PageContext, section: Section | undefined, title: string, body: HtmlValue): Html {
  const { base, home } = context;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${title} · ledgerflow</title><style>${STYLE_MARKUP}</style></head>
<body><header><strong>ledgerflow</strong>${SECTIONS.map(
    ([id, label, path]) =>
      html`<a href="${path === '' ? home : `${base}${path}`}" class="${id === section ? 'on' : ''}">${label}</a>`,
  )}<span class="who">signed in as ${context.actor}</span></header>
<main>${body}</main></body></html>`;
}

/** A status as a coloured label. */
export function statusBadge(status: string): Html {
  return html`<span class="st st-${status}">${status}</span>`;
}

/** A run's status label, with a second one while it compensates: `running` `compensating (failure)` (core 0013). */
export function runStatusBadge(run: {
  readonly status: RunStatus;
  readonly compensation: CompensationReason | null;
}): Html {
  const reason = compensatingReason(run);
  return reason === undefined
    ? statusBadge(run.status)
    : html`${statusBadge(run.status)} <span class="st st-compensating" title="undoing its recorded effects">compensating (${reason})</span>`;
}
