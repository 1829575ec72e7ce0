import type { Hono } from 'hono';
import { sql } from 'kysely';
import { loadRunDetails } from '../../client/run-details.js';
import { loadStepDefs } from '../../client/run-step-label.js';
import { render, type DashboardContext, type DashboardEnv } from '../dashboard-context.js';
import { BadRequestError, parseIntentParams, parseRunListParams } from '../list-params.js';
import { loadOpenIntents } from '../open-intents.js';
import { loadRunPage } from '../../client/run-list.js';
import { auditView } from '../views/audit-view.js';
import { intentsView } from '../views/intents-view.js';
import { queuesView } from '../views/queues-view.js';
import { runView } from '../views/run-view.js';
import { runsView } from '../views/runs-view.js';

/** Fixed messages an action's redirect may ask a page to show (never text from the query string). */
export const NOTICES = {
  cancelled: 'The run was cancelled.',
  'cancel-compensating':
    'The run is compensating, not cancelled: its recorded effects are being undone. It ends compensated, or compensation_failed if an undo fails.',
  'already-final': 'The run had already finished: nothing was cancelled.',
  compensating:
    'The run is compensating: it is not cancelled, it goes on undoing its effects until it is compensated or compensation_failed.',
  retried: 'The run was put back to pending from its failed step: a worker will pick it up.',
  'resolved-found': 'The intent was recorded as found with the output you entered; the run goes on.',
  'resolved-not-found':
    'The intent was released as not found: the step will call the provider again with the same key.',
  paused: 'Paused.',
  resumed: 'Resumed.',
  unchanged: 'It was already in that state: nothing changed.',
} as const;

export type NoticeCode = keyof typeof NOTICES;

function notice(code: string | undefined): string | undefined {
  return code !== undefined && code in NOTICES ? NOTICES[code as NoticeCode] : undefined;
}

export function readRoutes(app: Hono<DashboardEnv>, shared: DashboardContext): void {
  const { store, operations } = shared;

  app.get('/', async (c) => {
    const params = parseRunListParams(new URL(c.req.url).searchParams);
    const [{ page, counts }, names] = await Promise.all([
      loadRunPage(store.db, params.filter, params.cursor, params.limit),
      store.db
        .selectFrom('ledgerflow.workflow_version')
        .select('workflow_name')
        .distinct()
        .orderBy('workflow_name')
        .execute(),
    ]);
    const defs = await loadStepDefs(store.db, page.rows);
    return render(
      c,
      runsView(c.get('page'), { params, page, counts, defs, workflows: names.map((n) => n.workflow_name) }),
    );
  });

  app.get('/runs/:id', async (c) => {
    const id = c.req.param('id');
    const [run, audit, now] = await Promise.all([
      loadRunDetails(store.db, id),
      operations.listAudit({ runId: id, limit: 100 }),
      databaseNow(shared),
    ]);
    const defs = await loadStepDefs(store.db, [run]);
    const done = notice(c.req.query('done'));
    return render(
      c,
      runView(c.get('page'), { run, audit, now, defs, ...(done !== undefined ? { notice: done } : {}) }),
    );
  });

  app.get('/intents', async (c) => {
    const { cursor, limit } = parseIntentParams(new URL(c.req.url).searchParams);
    const { rows, next } = await loadOpenIntents(store.db, cursor, limit);
    return render(c, intentsView(c.get('page'), { rows, next, first: cursor === undefined, limit }));
  });

  app.get('/queues', async (c) => {
    const [queues, schedules] = await Promise.all([operations.listQueues(), operations.listSchedules()]);
    const done = notice(c.req.query('done'));
    const view = queuesView(c.get('page'), queues, schedules, done);
    return render(c, view);
  });

  app.get('/audit', async (c) => {
    const text = c.req.query('limit') ?? '200';
    if (!/^\d{1,4}$/.test(text) || Number(text) < 1 || Number(text) > 1000) {
      throw new BadRequestError(`limit must be an integer from 1 to 1000 (got "${text}").`);
    }
    const entries = await operations.listAudit({ limit: Number(text) });
    return render(c, auditView(c.get('page'), entries, Number(text)));
  });
}

/** The database's clock: horizons and running attempts are measured against it, not the server's. */
export async function databaseNow(shared: DashboardContext): Promise<Date> {
  const { rows } = await sql<{ now: Date }>`SELECT statement_timestamp() AS now`.execute(shared.store.db);
  return rows[0]!.now;
}
