import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { hostname } from 'node:os';

/**
 * Who is at the dashboard, and the checks every request passes (DESIGN.md, "Dashboard").
 *
 * - Access: without `auth`, everyone who can reach the port (serveDashboard binds 127.0.0.1
 *   unless given a token). With `{ token }`: `Authorization: Bearer <token>`, or the token once
 *   as `?token=`, which sets an HttpOnly SameSite=Strict cookie holding a proof derived from the
 *   token (never the token itself). With a function: whatever identity it returns for the request.
 * - CSRF: every state-changing request is a POST carrying a token that is an HMAC of the browser's
 *   session id (its own HttpOnly SameSite=Strict cookie) under a server secret, and an `Origin`
 *   (or `Referer`) whose host is the request's `Host`.
 * - The actor written to the audit trail is the identity's: the hook's, the token's (`token:` and
 *   the first 8 hex digits of its SHA-256, unless named), or `dashboard@<this machine's hostname>`.
 */

export interface DashboardIdentity {
  /** Written to the audit trail as the actor of every action. */
  readonly actor: string;
}

/** Tells who sent a request, or `undefined` to refuse it (401). */
export type DashboardAuthHook = (
  request: Request,
) => DashboardIdentity | undefined | Promise<DashboardIdentity | undefined>;

export type DashboardAuth =
  /** One shared access token; `actor` names it in the audit trail. */
  { readonly token: string; readonly actor?: string } | DashboardAuthHook;

export const AUTH_COOKIE = 'ledgerflow_dashboard_auth';
export const SESSION_COOKIE = 'ledgerflow_dashboard_session';
/** The form field (or header) that carries the CSRF token of a POST. */
export const CSRF_FIELD = 'csrf';
export const CSRF_HEADER = 'x-csrf-token';
/** A token shorter than this is refused: it would be guessable. */
export const MIN_TOKEN_LENGTH = 16;

/** The actor of an unauthenticated (loopback) dashboard. */
export function localActor(): string {
  return `dashboard@${hostname()}`;
}

/** The audit actor of a token that was not named: it tells tokens apart without revealing one. */
export function tokenActor(token: string): string {
  return `token:${createHash('sha256').update(token).digest('hex').slice(0, 8)}`;
}

/** What the auth cookie holds: proof of the token, useless as a Bearer token and not reversible. */
export function tokenCookieValue(token: string): string {
  return createHmac('sha256', token).update('ledgerflow-dashboard-session').digest('base64url');
}

/** Equal strings in time independent of where they differ (both are hashed to one length first). */
export function constantTimeEqual(a: string, b: string): boolean {
  const da = createHash('sha256').update(a).digest();
  const db = createHash('sha256').update(b).digest();
  return timingSafeEqual(da, db);
}

export function checkToken(token: string): void {
  if (token.length < MIN_TOKEN_LENGTH) {
    throw new TypeError(
      `The dashboard's access token must be at least ${MIN_TOKEN_LENGTH} characters (got ${token.length}); use e.g. \`openssl rand -hex 32\`.`,
    );
  }
}

/** Signs and checks CSRF tokens: HMAC-SHA256 of the session id under a secret. */
export class CsrfTokens {
  readonly #secret: Buffer;
  constructor(secret: string | undefined) {
    this.#secret = secret === undefined ? randomBytes(32) : Buffer.from(secret);
  }
  static newSessionId(): string {
    return randomBytes(18).toString('base64url');
  }
  tokenFor(sessionId: string): string {
    return createHmac('sha256', this.#secret).update(`csrf:${sessionId}`).digest('base64url');
  }
  verify(sessionId: string | undefined, token: string | undefined): boolean {
    if (sessionId === undefined || token === undefined || sessionId === '' || token === '') return false;
    return constantTimeEqual(this.tokenFor(sessionId), token);
  }
}

/**
 * Is this POST from a page of this dashboard? Its `Origin` (else its `Referer`) must name the
 * host the request was sent to, or one of `allowedOrigins` (behind a proxy that rewrites Host).
 * A request with neither header is refused: every browser sends Origin with a form POST.
 */
export function sameOrigin(request: Request, allowedOrigins: readonly string[]): string | undefined {
  const claimed = request.headers.get('origin') ?? refererOrigin(request.headers.get('referer'));
  if (claimed === undefined || claimed === 'null') return 'the request has no Origin or Referer header';
  if (allowedOrigins.includes(claimed)) return undefined;
  const host = request.headers.get('host') ?? new URL(request.url).host;
  let claimedHost: string;
  try {
    claimedHost = new URL(claimed).host;
  } catch {
    return `its Origin "${claimed}" is not a URL`;
  }
  return claimedHost === host ? undefined : `its Origin ${claimed} is not this dashboard (${host})`;
}

function refererOrigin(referer: string | null): string | undefined {
  if (referer === null) return undefined;
  try {
    return new URL(referer).origin;
  } catch {
    return undefined;
  }
}

/** Loopback addresses and names: the only hosts the dashboard binds without a token. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  return bare === 'localhost' || bare === '::1' || /^127(\.\d{1,3}){3}$/.test(bare);
}
