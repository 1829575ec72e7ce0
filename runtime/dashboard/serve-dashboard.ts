import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { checkToken, isLoopbackHost } from './auth.js';
import { createDashboard, type DashboardOptions } from './dashboard.js';

export interface ServeDashboardOptions extends Omit<DashboardOptions, 'auth'> {
  /** Default 127.0.0.1. Any other address needs `token` or `auth`. */
  readonly host?: string;
  /** Default 4780; 0 picks a free port. */
  readonly port?: number;
  /** Shared access token (at least 16 characters); required unless the host is a loopback address or `auth` is given. */
  readonly token?: string;
  /** Actor of the token in the audit trail (default `token:` + 8 hex digits of its SHA-256). */
  readonly tokenActor?: string;
  readonly auth?: DashboardOptions['auth'];
}

export interface ServedDashboard {
  /** Where it listens, e.g. `http://127.0.0.1:4780/` (with its base path, if any). */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  close(): Promise<void>;
}

export const DEFAULT_DASHBOARD_PORT = 4780;
export const DEFAULT_DASHBOARD_HOST = '127.0.0.1';

/**
 * Serves {@link createDashboard} over HTTP with Node's server. Bound to 127.0.0.1 by default; it
 * refuses to start on any other address without an access token (or an `auth` hook).
 *
 * @example
 * const dashboard = await serveDashboard({ store, workflows, port: 4780 });
 * console.log(`dashboard at ${dashboard.url}`);
 * // … later
 * await dashboard.close();
 */
export async function serveDashboard(options: ServeDashboardOptions): Promise<ServedDashboard> {
  const host = options.host ?? DEFAULT_DASHBOARD_HOST;
  const { token, tokenActor, host: _host, port: _port, auth: hook, ...rest } = options;
  assertServable(host, token, hook);
  const auth = token !== undefined ? { token, ...(tokenActor !== undefined ? { actor: tokenActor } : {}) } : hook;
  const app = createDashboard({ ...rest, ...(auth !== undefined ? { auth } : {}) });
  const port = options.port ?? DEFAULT_DASHBOARD_PORT;
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const started = serve({ fetch: app.fetch, hostname: host, port }, () => resolve(started));
    started.once('error', reject);
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${shownHost}:${address.port}${options.basePath === undefined || options.basePath === '/' ? '/' : options.basePath}`,
    host: address.address,
    port: address.port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // Idle keep-alive connections (a browser's) would hold close() open.
        if ('closeAllConnections' in server) server.closeAllConnections();
      }),
  };
}

/**
 * Refuses what would expose the dashboard: a host other than a loopback address without a token
 * or an auth hook, a short token, or both a token and a hook. (The CLI calls it before it opens
 * the database.)
 */
export function assertServable(
  host: string,
  token: string | undefined,
  auth: DashboardOptions['auth'] | undefined,
): void {
  if (token !== undefined && auth !== undefined)
    throw new TypeError('Give serveDashboard either a token or an auth hook, not both.');
  if (token !== undefined) checkToken(token);
  if (token === undefined && auth === undefined && !isLoopbackHost(host)) {
    throw new TypeError(
      `Refusing to serve the dashboard on ${host} without an access token: anyone who reaches it could cancel runs. ` +
        'Give a token (--token or LEDGERFLOW_DASHBOARD_TOKEN), or bind 127.0.0.1.',
    );
  }
}
