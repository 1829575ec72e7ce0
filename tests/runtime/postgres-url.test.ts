import { EventEmitter } from 'node:events';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { isMultiHostUrl, parsePostgresUrl, PostgresUrlError } from '../../runtime/store/pg/postgres-url.js';
import { connectTimeoutOf, DEFAULT_CONNECT_TIMEOUT_MS } from '../../runtime/store/pg/pg-store.js';
import { defineConnect } from '../../runtime/store/pg/writable-host.js';

describe('parsePostgresUrl', () => {
  it('reads a host list in order, each with its port or the default, and defaults to read-write', () => {
    const target = parsePostgresUrl(
      'postgres://app:s%40cret@db1:5433,db2,[::1]:6000/orders?sslmode=disable&application_name=x',
    );
    expect(target.hosts).toEqual([
      { host: 'db1', port: 5433 },
      { host: 'db2', port: 5432 },
      { host: '::1', port: 6000 },
    ]);
    expect(target.targetSessionAttrs).toBe('read-write');
    expect(target.description).toBe('db1:5433,db2:5432,[::1]:6000/orders');
  });

  it('makes a single-host URL per host with everything else kept, and target_session_attrs removed', () => {
    const target = parsePostgresUrl(
      'postgresql://app:s%40cret@db1:5433,[::1]:6000/orders?target_session_attrs=any&sslmode=disable',
    );
    expect(target.targetSessionAttrs).toBe('any');
    expect(target.urlFor(target.hosts[0]!)).toBe('postgresql://app:s%40cret@db1:5433/orders?sslmode=disable');
    expect(target.urlFor(target.hosts[1]!)).toBe('postgresql://app:s%40cret@[::1]:6000/orders?sslmode=disable');
    // node-postgres reads the credentials back from it.
    const reparsed = new URL(target.urlFor(target.hosts[0]!));
    expect(decodeURIComponent(reparsed.password)).toBe('s@cret');
  });

  it('takes the port parameter as the default port of hosts without one', () => {
    const target = parsePostgresUrl('postgres://db1,db2:7000/app?port=6432');
    expect(target.hosts).toEqual([
      { host: 'db1', port: 6432 },
      { host: 'db2', port: 7000 },
    ]);
    expect(target.urlFor(target.hosts[0]!)).toBe('postgres://db1:6432/app');
  });

  it("keeps one host at libpq's default (any) unless read-write is asked for", () => {
    expect(parsePostgresUrl('postgres://u@db:5432/app').targetSessionAttrs).toBe('any');
    expect(parsePostgresUrl('postgres://u@db:5432/app?target_session_attrs=read-write').targetSessionAttrs).toBe(
      'read-write',
    );
  });

  it.each([
    ['mysql://db1,db2/app', 'must start with postgres:// or postgresql://'],
    ['postgres://db1,,db2/app', 'Host 2 of 3 in the database URL has no host name'],
    ['postgres://db1:5432,:5433/app', 'Host 2 of 2 in the database URL: ":5433" has a port but no host name'],
    ['postgres://db1:abc,db2/app', 'the port of db1:abc must be a number from 1 to 65535, got "abc"'],
    ['postgres://db1:70000,db2/app', 'must be a number from 1 to 65535, got "70000"'],
    ['postgres://db1:,db2/app', 'the port of db1: must be a number from 1 to 65535, got ""'],
    ['postgres://db1,::1:5432/app', 'has more than one ":"; write an IPv6 address in brackets'],
    ['postgres://db1,[::1/app', 'is not a bracketed IPv6 address'],
    ['postgres://db1,db2/app?port=x', 'the port parameter must be a number'],
    ['postgres://db1,db2/app?target_session_attrs=standby', 'target_session_attrs=standby is not supported'],
    ['postgres://db1,db2/app?target_session_attrs=prefer-standby', 'use read-write'],
  ])('refuses %s, saying what to fix', (url, message) => {
    const error = (() => {
      try {
        parsePostgresUrl(url);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(PostgresUrlError);
    expect((error as Error).message).toContain(message);
  });
});

describe('isMultiHostUrl', () => {
  it('is true for a host list or target_session_attrs, false for what node-postgres parses alone', () => {
    expect(isMultiHostUrl('postgres://u:p@db1:5432,db2:5432/app')).toBe(true);
    expect(isMultiHostUrl('postgres://db:5432/app?sslmode=require&target_session_attrs=read-write')).toBe(true);
    expect(isMultiHostUrl('postgres://u:p@db:5432/app')).toBe(false);
    // A comma in the password or the query is not a host list.
    expect(isMultiHostUrl('postgres://u:a,b@db:5432/app?options=-c%20x=1,2')).toBe(false);
  });
});

describe('connect timeout of a PostgreSQL store', () => {
  const base = 'postgres://u@db1:5432,db2:5432/app';
  it('reads connect_timeout as libpq does: seconds, at least 2, 0 for no limit; options win; 10 s by default', () => {
    expect(connectTimeoutOf({ connectionString: base })).toBe(DEFAULT_CONNECT_TIMEOUT_MS);
    expect(connectTimeoutOf({ connectionString: `${base}?connect_timeout=5` })).toBe(5_000);
    expect(connectTimeoutOf({ connectionString: `${base}?target_session_attrs=read-write&connect_timeout=1` })).toBe(
      2_000,
    );
    expect(connectTimeoutOf({ connectionString: `${base}?connect_timeout=0` })).toBe(0);
    expect(connectTimeoutOf({ connectionString: `${base}?connect_timeout=5`, connectTimeoutMs: 750 })).toBe(750);
  });
  it('refuses a connect_timeout or connectTimeoutMs that is not a whole number, saying what to write', () => {
    expect(() => connectTimeoutOf({ connectionString: `${base}?connect_timeout=1.5` })).toThrow(
      'connect_timeout=1.5 in the database URL must be a whole number of seconds >= 0 (0: no limit).',
    );
    expect(() => connectTimeoutOf({ connectionString: base, connectTimeoutMs: -1 })).toThrow(
      'connectTimeoutMs must be a whole number of milliseconds >= 0 (got -1).',
    );
  });
});

describe('a client whose connect picks its host first (defineConnect)', () => {
  it('keeps an error listener on the client until the pool has had its callback, so an error in between cannot crash the process', async () => {
    class Fake extends EventEmitter {}
    let threw: unknown;
    defineConnect(
      Fake as unknown as typeof pg.Client,
      (client) =>
        new Promise((resolve) => {
          resolve(client);
          // A server error parsed in the same packet as ReadyForQuery: before the caller's callback.
          queueMicrotask(() => {
            try {
              client.emit('error', new Error('terminating connection due to administrator command'));
            } catch (error) {
              threw = error;
            }
          });
        }),
    );
    const client = new Fake() as unknown as pg.Client;
    const connected = await new Promise<pg.Client | undefined>((resolve, reject) =>
      client.connect(((error: Error | null, c?: pg.Client) => (error ? reject(error) : resolve(c))) as never),
    );
    expect(connected).toBe(client);
    expect(threw).toBeUndefined();
    // The caller's own listeners are what remain.
    expect(client.listenerCount('error')).toBe(0);
  });
});
