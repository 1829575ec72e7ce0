import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { Hono } from 'hono';
import { queue, schedule } from 'ledgerflow/dsl';
import { createClient, createWorker, type Client } from 'ledgerflow/runtime';
import { createDashboard, serveDashboard } from 'ledgerflow/dashboard';
import { AUTH_COOKIE, SESSION_COOKIE } from '../../runtime/dashboard/auth.js';
import { prefixUpperBound } from '../../runtime/client/run-list.js';
import { main } from '../../runtime/cli/main.js';
import { registerSchedules } from '../../runtime/schedules/register-schedules.js';
import { registerQueueStatement } from '../../runtime/worker/queue-slots.js';
import { describeStores } from '../support/describe-stores.js';
import { createPgTestStore } from '../support/test-stores.js';
import { migrateForTest } from '../support/migrate-for-test.js';
import { DASHBOARD_WORKFLOWS, dashboardHandlers, flaky, ordersV2, receipt } from './fixtures/dashboard-workflows.js';
import { ORIGIN, session } from './support/browserless-session.js';

const TOKEN = 'test-token-0123456789abcdef';

/**
 * The dashboard over HTTP without a browser, on both stores: who gets in (token, cookie, hook),
 * that a state-changing request needs POST + this session's CSRF token + this dashboard's origin
 * (and changes nothing otherwise), what bad input answers, and that every value is escaped.
 */
describeStores('dashboard over HTTP', (getStore) => {
  let client: Client;
  let pending: string;
  let parked: string;
  let hostile: string;

  beforeAll(async () => {
    const store = getStore();
    await migrateForTest(store, DASHBOARD_WORKFLOWS);
    client = createClient({ store, workflows: DASHBOARD_WORKFLOWS });
    // An intent left open by a call whose outcome is unknown (one attempt, no reconciler).
    parked = (await client.start(receipt, { orderId: 'r-1' })).runId;
    const worker = createWorker({
      store,
      workflows: dashboardHandlers().filter((r) => r.workflow === receipt),
      pollIntervalMs: 20,
      reconcileIntervalMs: 0,
    });
    try {
      await worker.drain({ timeoutMs: 20_000 });
    } finally {
      await worker.stop();
    }
    // Not claimed by any worker: they stay pending.
    pending = (await client.start(flaky, { label: 'to-cancel' })).runId;
    hostile = (
      await client.start(
        ordersV2,
        { orderId: '<script>alert("pwned")</script>', amountCents: 1 },
        { dedupeKey: '<img src=x onerror=alert(1)>' },
      )
    ).runId;
    for (let i = 0; i < 5; i++) await client.start(flaky, { label: `page-${i}` }, { dedupeKey: `page-${i}` });
  });

  const dashboard = (options: Partial<Parameters<typeof createDashboard>[0]> = {}) =>
    createDashboard({ store: getStore(), workflows: DASHBOARD_WORKFLOWS, ...options });

  describe('access', () => {
    it('without auth serves everyone and sets an HttpOnly SameSite=Strict session cookie', async () => {
      const response = await dashboard().fetch(new Request(`${ORIGIN}/`));
      expect(response.status).toBe(200);
      expect(await response.text()).toContain('<h1>Runs</h1>');
      const cookie = response.headers.getSetCookie().find((c) => c.startsWith(`${SESSION_COOKIE}=`));
      expect(cookie).toMatch(/HttpOnly/);
      expect(cookie).toMatch(/SameSite=Strict/);
      expect(response.headers.get('content-security-policy')).toContain("default-src 'none'");
    });

    it('with a token: refuses without it, takes ?token= once (cookie, redirect without it), then the cookie or a Bearer header', async () => {
      const app = dashboard({ auth: { token: TOKEN } });
      const browser = session(app.fetch);
      expect((await browser.get('/')).status).toBe(401);
      expect((await browser.get('/?token=wrong-token-0123456789')).status).toBe(401);
      const login = await browser.get(`/intents?token=${TOKEN}`);
      expect(login.status).toBe(303);
      expect(login.headers.get('location')).toBe('/intents');
      const set = login.headers.getSetCookie().find((c) => c.startsWith(`${AUTH_COOKIE}=`))!;
      expect(set).toMatch(/HttpOnly/);
      expect(set).toMatch(/SameSite=Strict/);
      expect(browser.cookies.get(AUTH_COOKIE)).not.toContain(TOKEN);
      expect((await browser.get('/intents')).status).toBe(200);
      const bearer = session(app.fetch);
      expect((await bearer.get('/', { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
      expect((await bearer.get('/', { authorization: 'Bearer not-the-token-at-all' })).status).toBe(401);
      // A forged cookie is not the proof.
      const forged = session(app.fetch);
      forged.cookies.set(AUTH_COOKIE, TOKEN);
      expect((await forged.get('/')).status).toBe(401);
    });

    it('without auth answers only requests addressed to a loopback name (no DNS rebinding)', async () => {
      const app = dashboard();
      for (const origin of ['http://localhost:4780', 'http://[::1]:4780'])
        expect((await app.fetch(new Request(`${origin}/`))).status).toBe(200);
      const rebound = await app.fetch(new Request('http://attacker.example:4780/'));
      expect(rebound.status).toBe(403);
      expect(await rebound.text()).toMatch(/answers only requests addressed to 127\.0\.0\.1, localhost or \[::1\]/);
      // With a token (or a hook) any name is served to whoever proves it.
      const guarded = dashboard({ auth: { token: 'a-token-of-sixteen-chars' } });
      const bearer = await guarded.fetch(
        new Request('http://ops.example.com/', { headers: { authorization: 'Bearer a-token-of-sixteen-chars' } }),
      );
      expect(bearer.status).toBe(200);
    });

    it('mounts under a base path in another Hono app: its links and cookies stay under it', async () => {
      const outer = new Hono();
      outer.get('/', (c) => c.text('the application'));
      outer.route('/', dashboard({ basePath: '/ops' }));
      expect(await (await outer.fetch(new Request(`${ORIGIN}/`))).text()).toBe('the application');
      const response = await outer.fetch(new Request(`${ORIGIN}/ops?workflow=dash-flaky`));
      expect(response.status).toBe(200);
      const page = await response.text();
      expect(page).toMatch(/<a href="\/ops\/runs\/[0-9a-f-]{36}"/);
      expect(page).toContain('href="/ops/intents"');
      expect(page).toContain('action="/ops"');
      expect(response.headers.getSetCookie()[0]).toContain('Path=/ops');
      expect((await outer.fetch(new Request(`${ORIGIN}/ops/intents`))).status).toBe(200);
    });

    it('refuses a token too short to be secret', () => {
      expect(() => dashboard({ auth: { token: 'short' } })).toThrow(/at least 16 characters/);
    });

    it('with a hook: the identity it returns is the actor; undefined is 401', async () => {
      const app = dashboard({
        auth: (request) => (request.headers.get('x-user') ? { actor: request.headers.get('x-user')! } : undefined),
      });
      expect((await app.fetch(new Request(`${ORIGIN}/`))).status).toBe(401);
      const page = await app.fetch(new Request(`${ORIGIN}/`, { headers: { 'x-user': 'alice@example.com' } }));
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('signed in as alice@example.com');
    });
  });

  describe('actions', () => {
    it("a POST without the CSRF token, with another session's, or from another origin is 403 and changes nothing", async () => {
      const app = dashboard();
      const browser = session(app.fetch);
      const csrf = await browser.csrfFrom(`/runs/${pending}/cancel`);
      const other = session(app.fetch);
      const otherCsrf = await other.csrfFrom(`/runs/${pending}/cancel`);
      const attempts = [
        await browser.post(`/runs/${pending}/cancel`, { reason: 'no token' }),
        await browser.post(`/runs/${pending}/cancel`, { reason: 'not my token', csrf: otherCsrf }),
        await browser.post(`/runs/${pending}/cancel`, { reason: 'cross-site', csrf }, { origin: 'http://evil.test' }),
        await browser.post(`/runs/${pending}/cancel`, { reason: 'no origin', csrf }, { origin: null }),
        await session(app.fetch).post(`/runs/${pending}/cancel`, { reason: 'no session', csrf }),
      ];
      expect(attempts.map((r) => r.status)).toEqual([403, 403, 403, 403, 403]);
      expect(await attempts[0]!.text()).toContain('Nothing was changed');
      expect((await client.getRun(pending)).status).toBe('pending');
      expect(await client.listAudit({ runId: pending })).toEqual([]);
    });

    it('a POST needs a reason; with one it acts, audited with the actor and reason, and redirects to the run', async () => {
      const app = dashboard({ auth: { token: TOKEN, actor: 'ops-token' } });
      const browser = session(app.fetch);
      await browser.get(`/?token=${TOKEN}`);
      const csrf = await browser.csrfFrom(`/runs/${pending}/cancel`);
      const noReason = await browser.post(`/runs/${pending}/cancel`, { reason: ' ', csrf });
      expect(noReason.status).toBe(400);
      expect(await noReason.text()).toContain('A reason of at least 3 characters is required');
      expect((await client.getRun(pending)).status).toBe('pending');
      const done = await browser.post(`/runs/${pending}/cancel`, { reason: 'customer asked to stop', csrf });
      expect(done.status).toBe(303);
      expect(done.headers.get('location')).toBe(`/runs/${pending}?done=cancelled`);
      expect((await client.getRun(pending)).status).toBe('cancelled');
      const audit = await client.listAudit({ runId: pending });
      expect(audit.map((a) => [a.action, a.actor, a.reason])).toEqual([
        ['cancel', 'ops-token', 'customer asked to stop'],
      ]);
      const page = await (await browser.get(done.headers.get('location')!)).text();
      expect(page).toContain('The run was cancelled.');
      expect(page).toContain('customer asked to stop');
    });

    it('resolving an intent as found: invalid JSON and an output the schema refuses are shown, nothing is written', async () => {
      const browser = session(dashboard().fetch);
      const path = `/runs/${parked}/effects/send/resolve`;
      const csrf = await browser.csrfFrom(path);
      const notJson = await browser.post(path, {
        outcome: 'found',
        output: '{messageId: msg_1',
        reason: 'looked it up',
        csrf,
      });
      expect(notJson.status).toBe(400);
      expect(await notJson.text()).toContain('The output is not valid JSON');
      const wrong = await browser.post(path, {
        outcome: 'found',
        output: '{"messageId": "m-1"}',
        reason: 'looked it up',
        csrf,
      });
      expect(wrong.status).toBe(400);
      const text = await wrong.text();
      expect(text).toContain('does not match the output schema of step send');
      expect(text).toContain('messageId:');
      // The form keeps what was typed.
      expect(text).toContain('{&quot;messageId&quot;: &quot;m-1&quot;}');
      const run = await client.getRun(parked);
      expect(run.effects.map((e) => e.status)).toEqual(['intent']);
      expect(await client.listAudit({ runId: parked })).toEqual([]);
    });

    it('pauses and resumes a queue and a schedule from the queues page, each audited', async () => {
      const store = getStore();
      await registerQueueStatement(queue('dash-email', { concurrency: 2 })).execute(store.db);
      await registerSchedules(store.db, [
        schedule('dash-nightly', { cron: '0 2 * * *', workflow: flaky, input: () => ({ label: 'nightly' }) }),
      ]);
      const browser = session(dashboard().fetch);
      const listed = await (await browser.get('/queues')).text();
      expect(listed).toContain('dash-email');
      expect(listed).toContain('2 at once');
      expect(listed).toContain('dash-nightly');
      for (const [path, done] of [
        ['/queues/dash-email/pause', 'paused'],
        ['/queues/dash-email/pause', 'unchanged'],
        ['/schedules/dash-nightly/pause', 'paused'],
      ] as const) {
        const response = await browser.post(path, {
          reason: 'provider maintenance',
          csrf: await browser.csrfFrom(path),
        });
        expect(response.headers.get('location'), path).toBe(`/queues?done=${done}`);
      }
      expect((await client.listQueues()).find((q) => q.name === 'dash-email')?.paused).toBe(true);
      expect((await client.listSchedules()).find((q) => q.name === 'dash-nightly')?.paused).toBe(true);
      expect(await (await browser.get('/queues?done=paused')).text()).toContain('Resume…');
      for (const path of ['/queues/dash-email/resume', '/schedules/dash-nightly/resume']) {
        const response = await browser.post(path, { reason: 'maintenance over', csrf: await browser.csrfFrom(path) });
        expect(response.headers.get('location'), path).toBe('/queues?done=resumed');
      }
      expect((await client.listQueues()).find((q) => q.name === 'dash-email')?.paused).toBe(false);
      expect((await client.listSchedules()).find((q) => q.name === 'dash-nightly')?.paused).toBe(false);
      const audit = (await client.listAudit({ limit: 10 })).filter(
        (a) => a.target === 'dash-email' || a.target === 'dash-nightly',
      );
      expect(audit.map((a) => `${a.action} ${a.target} ${a.reason}`)).toEqual([
        'resume-schedule dash-nightly maintenance over',
        'resume-queue dash-email maintenance over',
        'pause-schedule dash-nightly provider maintenance',
        'pause-queue dash-email provider maintenance',
      ]);
      expect((await browser.get('/queues/no-such-queue/pause')).status).toBe(200);
      const missing = await browser.post('/queues/no-such-queue/pause', {
        reason: 'typo',
        csrf: await browser.csrfFrom('/queues/no-such-queue/pause'),
      });
      expect(missing.status).toBe(404);
    });
  });

  describe('input', () => {
    it('answers a filter it cannot read with 400 and what to fix', async () => {
      const app = dashboard();
      const cases: Array<[string, string]> = [
        ['/?status=bogus', 'Unknown status &quot;bogus&quot;'],
        ['/?version=2', 'A version filter needs a workflow'],
        ['/?from=yesterday', '&quot;from&quot; must be a time like 2026-03-01T12:00'],
        ['/?from=2026-03-02&to=2026-03-01', '&quot;from&quot; must be before &quot;to&quot;'],
        ['/?after=not-a-cursor', 'The &quot;after&quot; cursor is not one this dashboard wrote'],
        ['/?limit=0', 'limit must be an integer from 1 to 500'],
        ['/?match=fuzzy&key=a', 'match must be exact or prefix'],
        ['/intents?after=bm9wZQ', 'The &quot;after&quot; cursor is not one this dashboard wrote'],
        ['/runs/not-a-uuid', 'is not a UUID'],
      ];
      for (const [path, message] of cases) {
        const response = await app.fetch(new Request(`${ORIGIN}${path}`));
        expect(response.status, path).toBe(400);
        expect(await response.text(), path).toContain(message);
      }
      expect((await app.fetch(new Request(`${ORIGIN}/runs/00000000-0000-4000-8000-000000000000`))).status).toBe(404);
      expect((await app.fetch(new Request(`${ORIGIN}/`, { method: 'DELETE' }))).status).toBe(405);
    });

    it('renders hostile input and keys as text', async () => {
      const app = dashboard();
      for (const path of [`/runs/${hostile}`, '/?workflow=dash-orders']) {
        const page = await (await app.fetch(new Request(`${ORIGIN}${path}`))).text();
        expect(page).not.toContain('<script>alert');
        expect(page).not.toContain('<img src=x');
        expect(page).toContain('&lt;img src=x onerror=alert(1)&gt;');
      }
      const detail = await (await app.fetch(new Request(`${ORIGIN}/runs/${hostile}`))).text();
      expect(detail).toContain('&lt;script&gt;alert(\\&quot;pwned\\&quot;)&lt;/script&gt;');
    });

    it('pages runs by keyset: every run once, newest first; a key prefix search in key order', async () => {
      const app = dashboard();
      const ids: string[] = [];
      let path: string | undefined = '/?workflow=dash-flaky&limit=2';
      while (path !== undefined) {
        const page = await (await app.fetch(new Request(`${ORIGIN}${path}`))).text();
        ids.push(...[...page.matchAll(/<a href="\/runs\/([0-9a-f-]{36})"/g)].map((m) => m[1]!));
        path = /id="next-page" href="([^"]+)"/.exec(page)?.[1]?.replaceAll('&amp;', '&');
      }
      const runs = await client.listRuns({ workflow: 'dash-flaky', limit: 100 });
      expect(ids).toHaveLength(runs.length);
      expect([...ids].sort()).toEqual(runs.map((r) => r.id).sort());
      const created = new Map(runs.map((r) => [r.id, r.created_at.getTime()]));
      const times = ids.map((id) => created.get(id)!);
      expect(times).toEqual([...times].sort((a, b) => b - a));
      const found = await (await app.fetch(new Request(`${ORIGIN}/?key=page-&match=prefix`))).text();
      expect([...found.matchAll(/<td>(page-\d)<\/td>/g)].map((m) => m[1])).toEqual([
        'page-0',
        'page-1',
        'page-2',
        'page-3',
        'page-4',
      ]);
      const exact = await (await app.fetch(new Request(`${ORIGIN}/?key=page-&match=exact`))).text();
      expect(exact).toContain('No runs match.');
    });
  });
});

describe('serving the dashboard', () => {
  it('refuses a non-loopback host without a token, from the API and the CLI', async () => {
    const store = { kind: 'pg', db: undefined, location: 'nowhere' } as unknown as Parameters<
      typeof serveDashboard
    >[0]['store'];
    await expect(serveDashboard({ store, host: '0.0.0.0', port: 0 })).rejects.toThrow(/without an access token/);
    const err: string[] = [];
    const code = await main(
      ['dashboard', '--host', '0.0.0.0', '--port', '0', '--data-dir', '/nonexistent/never-opened'],
      { out: () => {}, err: (t) => err.push(t) },
    );
    expect(code).toBe(2);
    expect(err.join('')).toContain('Refusing to serve the dashboard on 0.0.0.0 without an access token');
  });

  it('ledgerflow dashboard serves until SIGTERM, behind its token', async () => {
    const store = await createPgTestStore();
    try {
      await migrateForTest(store, DASHBOARD_WORKFLOWS);
      const child = spawn(process.execPath, ['bin/ledgerflow.js', 'dashboard', '--port', '0', '--json'], {
        cwd: fileURLToPath(new URL('../../', import.meta.url)),
        env: { ...process.env, DATABASE_URL: store.url!, LEDGERFLOW_DASHBOARD_TOKEN: TOKEN },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      const exited = once(child, 'exit');
      await waitFor(() => stdout.includes('\n'), 20_000);
      const { url } = JSON.parse(stdout) as { url: string };
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      expect((await fetch(url)).status).toBe(401);
      const login = await fetch(`${url}?token=${TOKEN}`, { redirect: 'manual' });
      expect(login.status).toBe(303);
      const cookie = login.headers
        .getSetCookie()
        .map((c) => c.split(';')[0])
        .join('; ');
      const page = await fetch(url, { headers: { cookie } });
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('signed in as token:');
      child.kill('SIGTERM');
      expect(await exited).toEqual([0, null]);
    } finally {
      await store.close();
    }
  }, 30_000);

  it('prefix upper bounds are the next string in code point order', () => {
    expect(prefixUpperBound('order-')).toBe('order.');
    expect(prefixUpperBound('a\u{10FFFF}')).toBe('b');
    expect(prefixUpperBound('\u{D7FF}')).toBe('\u{E000}');
    expect(prefixUpperBound('')).toBeUndefined();
  });
});

async function waitFor(check: () => boolean, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`Not done within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
