import type { Context, Hono } from 'hono';
import { loadRunDetails, type RunDetails } from '../../client/run-details.js';
import { compensatingReason, runStatusLabel } from '../../client/run-status-label.js';
import { describeIssues } from '../../client/validate-input.js';
import { formatStoredError } from '../../presentation/format-values.js';
import { render, statusOf, type DashboardContext, type DashboardEnv } from '../dashboard-context.js';
import { html } from '../html.js';
import type { OperatorNote } from '../../client/operator/operator-action.js';
import type { EffectResolution } from '../../client/operator/resolve.js';
import { confirmView, messageView, type ConfirmForm } from '../views/confirm-view.js';
import { formatTime, horizonText } from '../views/format.js';
import { databaseNow, type NoticeCode } from './read-routes.js';

type DashboardContextOf = Context<DashboardEnv>;

/** Shortest reason accepted: the audit trail must say something. */
const MIN_REASON = 3;

/** A mistake in the form: the form is shown again with this message; nothing was done. */
class FormError extends Error {
  override readonly name = 'FormError';
}

/**
 * The operator actions. Each is a GET confirmation page and a POST of its form (the middleware
 * has already checked the POST's origin and CSRF token); the POST needs a reason, runs the action
 * through {@link DashboardContext.operations} with the request's actor, and redirects to the page
 * it changed — or shows the form again with what went wrong, nothing having been changed.
 */
export function actionRoutes(app: Hono<DashboardEnv>, shared: DashboardContext): void {
  const { store, operations } = shared;
  const runUrl = (c: DashboardContextOf, runId: string, done: NoticeCode): string =>
    `${c.get('page').base}/runs/${runId}?done=${done}`;

  /** Shows `form`, and on POST runs `act` with the note; `act` returns where to go next. */
  const confirmed = (
    path: string,
    form: (c: DashboardContextOf) => Promise<Omit<ConfirmForm, 'action' | 'error' | 'reason'>>,
    act: (c: DashboardContextOf, note: OperatorNote, body: Record<string, string>) => Promise<string>,
  ): void => {
    app.get(path, async (c) =>
      render(c, confirmView(c.get('page'), { ...(await form(c)), action: new URL(c.req.url).pathname })),
    );
    app.post(path, async (c) => {
      const body = stringFields(await c.req.parseBody());
      const reason = (body['reason'] ?? '').trim();
      const again = async (error: string, status: 400 | 404 | 409 | 500) =>
        render(
          c,
          confirmView(c.get('page'), { ...(await form(c)), action: new URL(c.req.url).pathname, error, reason }),
          status,
        );
      if (reason.length < MIN_REASON)
        return again(`A reason of at least ${MIN_REASON} characters is required: it goes to the audit trail.`, 400);
      try {
        return c.redirect(await act(c, { actor: c.get('page').actor, reason }, body), 303);
      } catch (error) {
        if (error instanceof FormError) return again(error.message, 400);
        const status = statusOf(error);
        if (status === 500) throw error;
        return again((error as Error).message, status);
      }
    });
  };

  confirmed(
    '/runs/:id/cancel',
    async (c) => {
      const run = await loadRunDetails(store.db, param(c, 'id'));
      return {
        section: 'runs',
        title: `Cancel run ${run.id}`,
        explain:
          compensatingReason(run) === undefined
            ? html`<p>${run.workflow_name} v${run.workflow_version}, now <b>${run.status}</b>. Cancelling fences out any worker holding it
(its commit will be refused), starts no new effect, and cancels its unfinished children. An open intent is still reconciled.</p>`
            : html`<p>${run.workflow_name} v${run.workflow_version}, now <b>${runStatusLabel(run)}</b>. A run that is compensating is not
cancelled: it goes on undoing its recorded effects until it is compensated or compensation_failed.</p>`,
        submit: 'Cancel the run',
        danger: true,
        back: `${c.get('page').base}/runs/${run.id}`,
      };
    },
    async (c, note) => {
      const id = param(c, 'id');
      const cancelled = await operations.cancel(id, note);
      const compensating = compensatingReason(await loadRunDetails(store.db, id)) !== undefined;
      // A cancel that compensates (`compensateOnCancel`) leaves the run undoing its effects, not cancelled.
      if (cancelled) return runUrl(c, id, compensating ? 'cancel-compensating' : 'cancelled');
      return runUrl(c, id, compensating ? 'compensating' : 'already-final');
    },
  );

  confirmed(
    '/runs/:id/retry',
    async (c) => {
      const run = await loadRunDetails(store.db, param(c, 'id'));
      const failed = lastFailure(run);
      return {
        section: 'runs',
        title: `Retry run ${run.id}`,
        explain: html`<p>${run.workflow_name} v${run.workflow_version}, now <b>${run.status}</b>. Retrying puts it back to pending from the ${
          run.status === 'compensation_failed' ? 'compensation' : 'step'
        } that failed
${failed === undefined ? '' : html`(<b>${failed.step_name}</b>, attempt ${failed.attempt}: ${formatStoredError(failed.error, 300)})`}${
  run.status === 'compensation_failed' ? ', then the compensations after it' : ''
}; the steps it completed
keep their checkpointed outputs and their ledger rows, so no effect is repeated.</p>`,
        submit: 'Retry from the failed step',
        back: `${c.get('page').base}/runs/${run.id}`,
      };
    },
    async (c, note) => {
      const { runId } = await operations.retryRun(param(c, 'id'), note);
      return runUrl(c, runId, 'retried');
    },
  );

  confirmed(
    '/runs/:id/effects/:step/resolve',
    async (c) => {
      const [run, now] = await Promise.all([loadRunDetails(store.db, param(c, 'id')), databaseNow(shared)]);
      const step = param(c, 'step');
      const intent = run.effects.find((e) => e.step_name === step && e.status === 'intent');
      const body = c.req.method === 'POST' ? stringFields(await c.req.parseBody()) : {};
      const outcome = body['outcome'] ?? 'found';
      return {
        section: 'intents',
        title: `Resolve the open intent of step ${step}`,
        explain:
          intent === undefined
            ? html`<p class="error">Step ${step} of run ${run.id} has no open intent (it may have been resolved meanwhile).</p>`
            : html`<p>Run <a href="${c.get('page').base}/runs/${run.id}">${run.id}</a> (${run.workflow_name} v${run.workflow_version}, ${run.status}):
the call with key <code>${intent.idempotency_key}</code> (attempt ${intent.attempt}, intent at ${formatTime(intent.intent_at)}, horizon
${horizonText(intent.reconcile_after, now)}) has an unknown outcome. Look it up at the provider, then say what you found.</p>
<p><b>Found</b> records the provider's result as the step's output (checked against the step's output schema and the output size limit) and the run goes on.
<b>Not found</b> releases the intent: the step calls the provider again with the same key.</p>`,
        fields: html`<p><label><input type="radio" name="outcome" value="found" ${outcome === 'found' ? 'checked' : ''}> Found — the step's output (JSON):</label><br>
<textarea name="output" id="output">${body['output'] ?? ''}</textarea></p>
<p><label><input type="radio" name="outcome" value="not-found" ${outcome === 'not-found' ? 'checked' : ''}> Not found — the provider has no effect under this key</label></p>`,
        submit: 'Resolve the intent',
        back: `${c.get('page').base}/runs/${run.id}`,
      };
    },
    async (c, note, body) => {
      const runId = param(c, 'id');
      const step = param(c, 'step');
      const resolution = await parseResolution(shared, runId, step, body);
      await operations.resolveEffect(runId, step, resolution, note);
      return runUrl(c, runId, 'found' in resolution ? 'resolved-found' : 'resolved-not-found');
    },
  );

  for (const kind of ['queues', 'schedules'] as const) {
    for (const verb of ['pause', 'resume'] as const) {
      confirmed(
        `/${kind}/:name/${verb}`,
        async (c) => {
          const name = param(c, 'name');
          const what = kind === 'queues' ? 'queue' : 'schedule';
          const effect =
            kind === 'queues'
              ? verb === 'pause'
                ? 'No new slot of it is granted until it is resumed; slots held now are kept until their attempts end.'
                : 'Slots are granted again to the runs waiting in line.'
              : verb === 'pause'
                ? 'No tick starts a run until it is resumed; workers that register it again leave it paused.'
                : 'It goes on from its next tick after now; ticks that fell while it was paused start nothing.';
          return {
            section: 'queues',
            title: `${verb === 'pause' ? 'Pause' : 'Resume'} ${what} ${name}`,
            explain: html`<p>${effect}</p>`,
            submit: verb === 'pause' ? `Pause ${what}` : `Resume ${what}`,
            danger: verb === 'pause',
            back: `${c.get('page').base}/queues`,
          };
        },
        async (c, note) => {
          const name = param(c, 'name');
          const run = {
            queues: { pause: operations.pauseQueue, resume: operations.resumeQueue },
            schedules: { pause: operations.pauseSchedule, resume: operations.resumeSchedule },
          }[kind][verb];
          const changed = await run.call(operations, name, note);
          return `${c.get('page').base}/queues?done=${changed ? (verb === 'pause' ? 'paused' : 'resumed') : 'unchanged'}`;
        },
      );
    }
  }

  app.get('/runs/:id/effects/:step', (c) => c.redirect(`${c.get('page').base}/runs/${param(c, 'id')}`, 303));
  // A POST to a page without a form (e.g. a stale bookmark) gets a clear refusal, not a 404 page.
  app.post('*', (c) => render(c, messageView(c.get('page'), 'Not found', 'No action here. Nothing was changed.'), 404));
}

/**
 * The resolution the form asks for. A found output must be JSON that the step's output schema
 * accepts — checked here against the workflow version of the run, so the page can say what is
 * wrong before anything is written.
 */
async function parseResolution(
  shared: DashboardContext,
  runId: string,
  step: string,
  body: Record<string, string>,
): Promise<EffectResolution> {
  const outcome = body['outcome'];
  if (outcome === 'not-found') return { notFound: true };
  if (outcome !== 'found') throw new FormError('Choose "found" or "not found".');
  const text = (body['output'] ?? '').trim();
  if (text === '') throw new FormError('A found intent needs the output the provider returned, as JSON.');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new FormError(`The output is not valid JSON: ${(error as Error).message}`);
  }
  const run = await shared.store.db
    .selectFrom('ledgerflow.workflow_run')
    .select(['workflow_name', 'workflow_version'])
    .where('id', '=', runId)
    .executeTakeFirst();
  if (run === undefined) throw new FormError(`No run with id ${runId}.`);
  const workflow = shared.definitions.get(`${run.workflow_name}@${run.workflow_version}`);
  if (workflow === undefined) {
    throw new FormError(
      `The dashboard does not have ${run.workflow_name} v${run.workflow_version}, so it cannot check the output against the step's schema. ` +
        'Start it with --workflows <module> exporting that version (or pass it in createDashboard({ workflows })).',
    );
  }
  const definition = workflow.steps.find((s) => s.name === step);
  if (definition === undefined)
    throw new FormError(`${run.workflow_name} v${run.workflow_version} has no step "${step}".`);
  const parsed = definition.output.safeParse(value);
  if (!parsed.success) {
    throw new FormError(
      `The output does not match the output schema of step ${step}:\n${describeIssues(parsed.error.issues)
        .map((i) => `  - ${i}`)
        .join('\n')}`,
    );
  }
  return { found: parsed.data };
}

function lastFailure(run: RunDetails) {
  return [...run.attempts].reverse().find((a) => a.status === 'failed' || a.status === 'abandoned');
}

/** A path parameter of the route (every route here declares the ones it reads). */
function param(c: DashboardContextOf, name: string): string {
  const value = c.req.param(name);
  if (value === undefined) throw new TypeError(`The route has no :${name} parameter.`);
  return value;
}

function stringFields(body: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(Object.entries(body).filter((e): e is [string, string] => typeof e[1] === 'string'));
}
