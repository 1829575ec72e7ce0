import { execFileSync } from 'node:child_process';
import { chownSync, mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The user the tests' servers (PostgreSQL, PgBouncer, pg_auto_failover) run as: they refuse to
 * run as root, so as root they run as `postgres` (or `PG_RUN_AS`). Spawning with that user's
 * uid/gid (rather than through runuser) keeps the server our direct child, so stop signals reach it.
 */
export interface ServerIdentity {
  readonly uid?: number;
  readonly gid?: number;
}

export function serverIdentity(): ServerIdentity {
  const runAs = process.env['PG_RUN_AS'] ?? (process.getuid?.() === 0 ? 'postgres' : undefined);
  if (runAs === undefined) return {};
  return {
    uid: Number(execFileSync('id', ['-u', runAs]).toString().trim()),
    gid: Number(execFileSync('id', ['-g', runAs]).toString().trim()),
  };
}

/** A new temporary directory (`prefix` + random) that the server user owns. */
export function ownedTempDir(prefix: string, identity: ServerIdentity): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (identity.uid !== undefined) chownSync(dir, identity.uid, identity.gid!);
  return dir;
}

/** A loopback port free at the moment of asking. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}
