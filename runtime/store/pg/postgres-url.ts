/**
 * libpq's multi-host connection URLs, which node-postgres does not parse:
 *
 *   postgres://user:secret@db1:5432,db2:5433,[::1]:5434/app?target_session_attrs=read-write
 *
 * The hosts are tried in order; `target_session_attrs=read-write` keeps the first that accepts
 * writes (libpq's meaning). ledgerflow writes on every connection, so with more than one host it
 * defaults to `read-write`, where libpq defaults to `any`; `any` (the first host that answers)
 * is accepted too. The other libpq values (`read-only`, `primary`, `standby`,
 * `prefer-standby`) name sessions ledgerflow cannot use and are refused.
 *
 * Everything but the host list and `target_session_attrs` (user, password, database, sslmode,
 * application_name, …) is left to node-postgres: each host becomes a single-host URL with the
 * rest of the original.
 */

export type TargetSessionAttrs = 'any' | 'read-write';

export interface PostgresHost {
  readonly host: string;
  readonly port: number;
}

export interface PostgresTarget {
  /** The hosts in the order they are tried (one for an ordinary URL). */
  readonly hosts: readonly PostgresHost[];
  readonly targetSessionAttrs: TargetSessionAttrs;
  /** A single-host URL node-postgres can parse: the original with `host` in place of the list. */
  urlFor(host: PostgresHost): string;
  /** `h1:5432,h2:5433/db`, for messages (no credentials). */
  readonly description: string;
}

/** A database URL that cannot be used; the message says what to fix. */
export class PostgresUrlError extends Error {
  override readonly name = 'PostgresUrlError';
}

const DEFAULT_PORT = 5432;

/**
 * Whether `url` lists several hosts or asks for `target_session_attrs`: what node-postgres
 * cannot honour alone. Any other URL is node-postgres's to parse, as it always was.
 */
export function isMultiHostUrl(url: string): boolean {
  const authority = /^[a-z]+:\/\/([^/?#]*)/i.exec(url)?.[1] ?? '';
  return authority.slice(authority.lastIndexOf('@') + 1).includes(',') || /[?&]target_session_attrs=/.test(url);
}
const EXAMPLE = 'postgres://user:password@host1:5432,host2:5432/database?target_session_attrs=read-write';

/**
 * Parses a `postgres://` or `postgresql://` URL with one host or a comma-separated host list.
 *
 * @example
 * const target = parsePostgresUrl('postgres://app@db1:5432,db2:5433/orders');
 * target.hosts;              // [{ host: 'db1', port: 5432 }, { host: 'db2', port: 5433 }]
 * target.targetSessionAttrs; // 'read-write'
 * target.urlFor(target.hosts[1]!); // 'postgres://app@db2:5433/orders'
 */
export function parsePostgresUrl(url: string): PostgresTarget {
  const match = /^(postgres(?:ql)?):\/\/([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/i.exec(url);
  if (match === null) {
    throw new PostgresUrlError(`The database URL must start with postgres:// or postgresql://, e.g. ${EXAMPLE}.`);
  }
  const [, scheme, authority = '', path = '', query = ''] = match;
  const at = authority.lastIndexOf('@');
  const userinfo = at >= 0 ? authority.slice(0, at + 1) : '';
  const hostList = authority.slice(at + 1);
  const params = new URLSearchParams(query.slice(1));
  const defaultPort = params.has('port') ? parsePort(params.get('port') ?? '', 'the port parameter') : DEFAULT_PORT;
  const entries = hostList.split(',');
  const hosts = entries.map((entry, i) => parseHost(entry, i, entries.length, defaultPort));

  const attrs = params.get('target_session_attrs');
  let targetSessionAttrs: TargetSessionAttrs;
  if (attrs === null) targetSessionAttrs = hosts.length > 1 ? 'read-write' : 'any';
  else if (attrs === 'any' || attrs === 'read-write') targetSessionAttrs = attrs;
  else {
    throw new PostgresUrlError(
      `target_session_attrs=${attrs} is not supported: ledgerflow writes on every connection, so use read-write ` +
        '(the first host that accepts writes) or any (the first host that answers).',
    );
  }
  params.delete('target_session_attrs');
  params.delete('port');
  const rest = params.toString();
  const tail = `${path}${rest === '' ? '' : `?${rest}`}`;
  const hostPart = (h: PostgresHost): string => `${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}`;
  return {
    hosts,
    targetSessionAttrs,
    urlFor: (host) => `${scheme}://${userinfo}${hostPart(host)}${tail}`,
    description: `${hosts.map(hostPart).join(',')}${path}`,
  };
}

function parseHost(entry: string, index: number, count: number, defaultPort: number): PostgresHost {
  const which = count === 1 ? 'The database URL' : `Host ${index + 1} of ${count} in the database URL`;
  if (entry === '') {
    throw new PostgresUrlError(
      `${which} has no host name; write host:port (hosts separated by commas), e.g. ${EXAMPLE}.`,
    );
  }
  const bracketed = /^\[([0-9a-fA-F:.]+)\](?::(.*))?$/.exec(entry);
  if (bracketed !== null) {
    const [, host = '', port] = bracketed;
    return { host, port: port === undefined ? defaultPort : parsePort(port, `the port of ${entry}`) };
  }
  if (entry.startsWith('['))
    throw new PostgresUrlError(`${which}: "${entry}" is not a bracketed IPv6 address like [::1]:5432.`);
  const colon = entry.indexOf(':');
  if (colon < 0) return { host: decodeURIComponent(entry), port: defaultPort };
  if (entry.indexOf(':', colon + 1) >= 0) {
    throw new PostgresUrlError(
      `${which}: "${entry}" has more than one ":"; write an IPv6 address in brackets, like [::1]:5432.`,
    );
  }
  const host = entry.slice(0, colon);
  if (host === '') throw new PostgresUrlError(`${which}: "${entry}" has a port but no host name.`);
  return { host: decodeURIComponent(host), port: parsePort(entry.slice(colon + 1), `the port of ${entry}`) };
}

function parsePort(text: string, what: string): number {
  const port = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(port >= 1 && port <= 65_535)) {
    throw new PostgresUrlError(`In the database URL, ${what} must be a number from 1 to 65535, got "${text}".`);
  }
  return port;
}
