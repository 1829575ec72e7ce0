import { Hono, type Context } from 'hono';
import { getCookie, setCookie } from 'hono/cookie';
import { z } from 'zod';
import { checkOptions, rule } from '../../dsl/option-checks.js';
import type { AnyWorkflow } from '../../dsl/workflow.js';
import { createClient } from '../client/client.js';
import type { WorkflowRegistration } from '../contracts/registration.js';
import type { Store } from '../store/store.js';
import { notMigratedError } from '../errors.js';
import {
  AUTH_COOKIE,
  checkToken,
  constantTimeEqual,
  CSRF_FIELD,
  CSRF_HEADER,
  CsrfTokens,
  isLoopbackHost,
  localActor,
  sameOrigin,
  SESSION_COOKIE,
  tokenActor,
  tokenCookieValue,
  type DashboardAuth,
  type DashboardIdentity,
} from './auth.js';
import { render, statusOf, type DashboardContext, type DashboardEnv } from './dashboard-context.js';
import type { DashboardOperations } from './operations.js';
import { actionRoutes } from './routes/action-routes.js';
import { readRoutes } from './routes/read-routes.js';
import { messageView } from './views/confirm-view.js';
import type { PageContext } from './views/layout.js';

export interface DashboardOptions {
  readonly store: Store;
  /**
   * The workflows whose step schemas check an output an operator enters to resolve an open
   * intent as found (plain workflows or registrations, every version that has runs). Without
   * the run's version here, such a resolution is refused.
   */
  readonly workflows?: ReadonlyArray<AnyWorkflow | WorkflowRegistration>;
  /**
   * Who may use the dashboard. Absent: anyone who reaches it, as `dashboard@<hostname>` — only
   * for a loopback address (what `serveDashboard` binds by default). `{ token }`: a shared access
   * token (Bearer header, or `?token=` once, which sets a cookie). A function: your own check
   * (a session, a proxy's header) returning the identity written to the audit trail, or
   * `undefined` to refuse (401).
   */
  readonly auth?: DashboardAuth;
  /** Where the dashboard is mounted, e.g. `/ops` (default: the root). Links and cookies use it. */
  readonly basePath?: string;
  /**
   * Origins (`https://ops.example.com`) from which forms may POST besides the request's own
   * host: needed behind a proxy that rewrites the `Host` header.
   */
  readonly allowedOrigins?: readonly string[];
  /** Secret for the CSRF tokens' HMAC; default: random per process (forms open across a restart must be reloaded). */
  readonly csrfSecret?: string;
  /** How actions are carried out and audited; default: a client over `store` with `workflows`. */
  readonly operations?: DashboardOperations;
}

/**
 * The web dashboard as a Hono app: server-rendered HTML, no client script, no build step. Serve
 * it with {@link serveDashboard}, or hand `app.fetch` to any server that speaks the Fetch API
 * (or mount it in your own Hono app with `app.route('/', dashboard)` and a `basePath`).
 *
 * @example
 * const dashboard = createDashboard({ store, workflows, auth: (req) => (req.headers.get('x-user') ? { actor: req.headers.get('x-user')! } : undefined), basePath: '/ops' });
 * app.route('/', dashboard);
 */
export function createDashboard(options: DashboardOptions): Hono<DashboardEnv> {
  checkOptions(dashboardOptionsSchema, options, (problems) => new TypeError(`${problems[0]}.`), {
    show: JSON.stringify,
  });
  const base = normalizeBase(options.basePath);
  const csrf = new CsrfTokens(options.csrfSecret);
  const auth = options.auth;
  if (auth !== undefined && typeof auth !== 'function') checkToken(auth.token);
  const local = localActor();
  const shared: DashboardContext = {
    store: options.store,
    operations: options.operations ?? createClient({ store: options.store, workflows: options.workflows ?? [] }),
    definitions: indexDefinitions(options.workflows ?? []),
  };
  const home = base === '' ? '/' : base;
  const cookiePath = home;
  const app = base === '' ? new Hono<DashboardEnv>() : new Hono<DashboardEnv>().basePath(base);

  app.use('*', async (c, next) => {
    c.header(
      'Content-Security-Policy',
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    c.header('X-Content-Type-Options', 'nosniff');
    c.header('Referrer-Policy', 'same-origin');
    c.header('Cache-Control', 'no-store');
    const method = c.req.method;
    if (method !== 'GET' && method !== 'HEAD' && method !== 'POST')
      return c.text('Only GET and POST.', 405, { Allow: 'GET, HEAD, POST' });

    const identity = await identify(c, auth, local, cookiePath);
    if (identity instanceof Response) return identity;

    let sessionId = getCookie(c, SESSION_COOKIE);
    const pageContext = (sid: string): PageContext => ({ base, home, actor: identity.actor, csrf: csrf.tokenFor(sid) });
    if (method === 'POST') {
      // Before any handler reads the form: a forged POST changes nothing.
      const refused = sameOrigin(c.req.raw, options.allowedOrigins ?? []);
      const context = pageContext(sessionId ?? '');
      if (refused !== undefined)
        return render(
          c,
          messageView(
            context,
            'Refused',
            `This form was not sent from this dashboard: ${refused}. Nothing was changed.`,
          ),
          403,
        );
      const form = await c.req.parseBody();
      const sent = typeof form[CSRF_FIELD] === 'string' ? form[CSRF_FIELD] : c.req.header(CSRF_HEADER);
      if (!csrf.verify(sessionId, sent)) {
        return render(
          c,
          messageView(
            context,
            'Refused',
            'The form has no valid CSRF token for this session (reload the page and send it again). Nothing was changed.',
          ),
          403,
        );
      }
    } else if (sessionId === undefined) {
      sessionId = CsrfTokens.newSessionId();
      setCookie(c, SESSION_COOKIE, sessionId, {
        httpOnly: true,
        sameSite: 'Strict',
        path: cookiePath,
        secure: isHttps(c),
      });
    }
    c.set('page', pageContext(sessionId ?? ''));
    await next();
  });

  readRoutes(app, shared);
  actionRoutes(app, shared);

  app.notFound((c) =>
    render(
      c,
      messageView(
        c.get('page') ?? { base, home, actor: local, csrf: '' },
        'Not found',
        `No page at ${new URL(c.req.url).pathname}.`,
      ),
      404,
    ),
  );
  app.onError((thrown, c) => {
    const context = c.get('page') ?? { base, home, actor: local, csrf: '' };
    // A database that was never migrated gets the CLI's advice, not the driver's "does not exist".
    const notMigrated = notMigratedError(thrown);
    if (notMigrated !== undefined)
      return render(c, messageView(context, 'Database not migrated', notMigrated.message), 500);
    const status = statusOf(thrown);
    return render(
      c,
      messageView(context, status === 500 ? 'Error' : status === 404 ? 'Not found' : 'Bad request', thrown.message),
      status,
    );
  });
  return app;
}

async function identify(
  c: Context<DashboardEnv>,
  auth: DashboardAuth | undefined,
  local: string,
  cookiePath: string,
): Promise<DashboardIdentity | Response> {
  if (auth === undefined) {
    // Without auth the dashboard trusts whoever reaches it, which is safe only on loopback. A page
    // of another site whose name is made to resolve to 127.0.0.1 (DNS rebinding) reaches it too,
    // but under that name: so answer only requests addressed to a loopback name.
    // The name the browser asked for: the Host header (as the CSRF check reads it), else the URL's.
    const host = new URL(`http://${c.req.header('host') ?? new URL(c.req.url).host}`).hostname;
    if (!isLoopbackHost(host)) {
      return c.text(
        `403 Forbidden: this dashboard has no access token, so it answers only requests addressed to 127.0.0.1, localhost or [::1] (this one was for "${host}"). Give it a token or an auth hook to serve other names.`,
        403,
      );
    }
    return { actor: local };
  }
  const refuse = (why: string): Response =>
    c.text(`401 Unauthorized: ${why}`, 401, { 'WWW-Authenticate': 'Bearer realm="ledgerflow dashboard"' });
  if (typeof auth === 'function') {
    const identity = await auth(c.req.raw);
    return identity ?? refuse("the dashboard's auth hook did not accept this request.");
  }
  const identity = { actor: auth.actor ?? tokenActor(auth.token) };
  const url = new URL(c.req.url);
  const given = url.searchParams.get('token');
  if (given !== null) {
    if (!constantTimeEqual(given, auth.token)) return refuse('wrong token.');
    // Once: the cookie takes over, and the token leaves the address bar (and the history).
    setCookie(c, AUTH_COOKIE, tokenCookieValue(auth.token), {
      httpOnly: true,
      sameSite: 'Strict',
      path: cookiePath,
      secure: isHttps(c),
    });
    url.searchParams.delete('token');
    return c.redirect(`${url.pathname}${url.search}`, 303);
  }
  const header = c.req.header('authorization');
  if (header !== undefined) {
    const bearer = /^Bearer\s+(.+)$/i.exec(header)?.[1];
    return bearer !== undefined && constantTimeEqual(bearer, auth.token) ? identity : refuse('wrong Bearer token.');
  }
  const cookie = getCookie(c, AUTH_COOKIE);
  if (cookie !== undefined && constantTimeEqual(cookie, tokenCookieValue(auth.token))) return identity;
  return refuse('open the dashboard once with ?token=<access token>, or send Authorization: Bearer <access token>.');
}

function isHttps(c: Context): boolean {
  return new URL(c.req.url).protocol === 'https:';
}

/** What {@link DashboardOptions} allow, of what is checked when the app is made (an access token: checkToken). */
const dashboardOptionsSchema = z.object({
  basePath: rule(
    z.string().regex(/^(\/?|\/[A-Za-z0-9._~\-/]*[^/])$/),
    'must start with "/" and not end with one, e.g. "/ops"',
  ).optional(),
});

function normalizeBase(basePath: string | undefined): string {
  return basePath === undefined || basePath === '/' ? '' : basePath;
}

function indexDefinitions(entries: ReadonlyArray<AnyWorkflow | WorkflowRegistration>): Map<string, AnyWorkflow> {
  const byVersion = new Map<string, AnyWorkflow>();
  for (const entry of entries) {
    const workflow = 'handlers' in entry ? entry.workflow : entry;
    byVersion.set(`${workflow.name}@${workflow.version}`, workflow);
  }
  return byVersion;
}
