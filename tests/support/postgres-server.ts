import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { freePort, ownedTempDir, serverIdentity } from './server-user.js';

/**
 * A throwaway PostgreSQL server for tests, chaos runs and benchmarks, started from the
 * machine's server binaries (`PG_BIN`, else the newest /usr/lib/postgresql/N/bin). PostgreSQL
 * refuses to run as root, so as root the server runs as the `postgres` user (override with
 * `PG_RUN_AS`) in a data directory that user owns.
 */
export interface PostgresServer {
  /** Connection string to the `postgres` database as superuser `postgres`. */
  readonly url: string;
  readonly port: number;
  readonly dataDir: string;
  /** Connection string for another database on this server. */
  urlFor(database: string): string;
  /** Stops the server: `fast` finishes cleanly, `immediate` is a crash (recovery on next start). */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  start(): Promise<void>;
  /** Stops (default: immediate, i.e. crash) and starts again on the same port and data. */
  restart(mode?: 'fast' | 'immediate'): Promise<void>;
  /** Stops and deletes the data directory. */
  destroy(): Promise<void>;
  /**
   * SIGKILLs the postmaster and every process it started, in one go: the machine died. No
   * shutdown checkpoint, no WAL sent to standbys after this instant. `start()` recovers.
   */
  kill(): Promise<void>;
  /** `pg_ctl promote` on a standby (see `standbyOf`), waiting until it accepts writes. */
  promote(): Promise<void>;
}

export interface StartPostgresOptions {
  /** Extra `-c name=value` settings. */
  readonly settings?: Readonly<Record<string, string>>;
  /**
   * Start a streaming-replication standby of the server at this port instead of a new cluster:
   * the data directory is a `pg_basebackup` of it, with `standby.signal`, and `primary_conninfo`
   * points at `connectPort` (default: the primary's port; a proxy in between can delay the
   * stream) under `applicationName` (what `synchronous_standby_names` names).
   */
  readonly standbyOf?: { readonly port: number; readonly connectPort?: number; readonly applicationName: string };
}

export function findPostgresBin(): string {
  const fromEnv = process.env['PG_BIN'];
  if (fromEnv) return fromEnv;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, 'bin', 'postgres')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions[0] === undefined) {
    throw new Error(
      'No PostgreSQL server binaries found. Install them (Debian: apt-get install postgresql) or set PG_BIN, ' +
        'or point DATABASE_URL at a running server.',
    );
  }
  return join(root, versions[0], 'bin');
}

export async function startPostgres(options: StartPostgresOptions = {}): Promise<PostgresServer> {
  const bin = findPostgresBin();
  // Spawning with the user's uid/gid (rather than through runuser) keeps the postmaster our
  // direct child, so stop signals reach it.
  const identity = serverIdentity();
  const dataDir = ownedTempDir('ledgerflow-pg-', identity);

  const standbyOf = options.standbyOf;
  if (standbyOf === undefined) {
    execFileSync(join(bin, 'initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'], {
      stdio: 'pipe',
      cwd: dataDir,
      ...identity,
    });
  } else {
    // initdb's pg_hba.conf lets local replication connections in (trust), so the copy needs no setup.
    execFileSync(
      join(bin, 'pg_basebackup'),
      [
        '-D',
        dataDir,
        '-h',
        '127.0.0.1',
        '-p',
        String(standbyOf.port),
        '-U',
        'postgres',
        '-X',
        'stream',
        '-c',
        'fast',
        '--no-sync',
      ],
      { stdio: 'pipe', cwd: dataDir, ...identity },
    );
    writeFileSync(join(dataDir, 'standby.signal'), '');
  }
  const port = await freePort();
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    port: String(port),
    unix_socket_directories: dataDir,
    max_connections: '300',
    shared_buffers: '128MB',
    ...(standbyOf === undefined
      ? {}
      : {
          primary_conninfo: `host=127.0.0.1 port=${standbyOf.connectPort ?? standbyOf.port} user=postgres application_name=${standbyOf.applicationName}`,
        }),
    ...options.settings,
  };
  writeFileSync(
    join(dataDir, 'postgresql.auto.conf'),
    `${Object.entries(settings)
      .map(([k, v]) => `${k} = '${v}'`)
      .join('\n')}\n`,
  );

  let child: ChildProcess | undefined;
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;

  const start = async (): Promise<void> => {
    const proc = spawn(join(bin, 'postgres'), ['-D', dataDir], {
      stdio: ['ignore', 'ignore', 'pipe'],
      cwd: dataDir,
      ...identity,
    });
    let log = '';
    proc.stderr?.on('data', (chunk: Buffer) => {
      log = (log + chunk.toString()).slice(-4000);
    });
    child = proc;
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`PostgreSQL exited during start-up:\n${log}`);
      try {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        await client.end();
        return;
      } catch (error) {
        if (Date.now() > deadline)
          throw new Error(`PostgreSQL did not accept connections within 30 s:\n${log}`, { cause: error });
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };

  const stop = async (mode: 'fast' | 'immediate' = 'fast'): Promise<void> => {
    const proc = child;
    if (proc === undefined || proc.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    // The postmaster takes SIGINT as "fast" and SIGQUIT as "immediate" shutdown.
    proc.kill(mode === 'fast' ? 'SIGINT' : 'SIGQUIT');
    await exited;
    child = undefined;
  };

  await start();
  process.once('exit', () => child?.kill('SIGQUIT'));

  return {
    url,
    port,
    dataDir,
    urlFor: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    stop,
    start,
    async restart(mode = 'immediate') {
      await stop(mode);
      await start();
    },
    async destroy() {
      await stop('fast');
      rmSync(dataDir, { recursive: true, force: true });
    },
    async kill() {
      const proc = child;
      if (proc === undefined || proc.exitCode !== null || proc.pid === undefined) return;
      const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
      for (const pid of [proc.pid, ...childrenOf(proc.pid)]) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
      await exited;
      child = undefined;
    },
    async promote() {
      execFileSync(join(bin, 'pg_ctl'), ['promote', '-w', '-t', '60', '-D', dataDir], {
        stdio: 'pipe',
        cwd: dataDir,
        ...identity,
      });
    },
  };
}

/** The processes whose parent is `pid` (Linux: /proc/<pid>/stat). */
function childrenOf(pid: number): number[] {
  if (!existsSync('/proc')) return [];
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      try {
        // pid (comm) state ppid …: comm may hold spaces and parentheses, so read after the last ')'.
        const stat = readFileSync(join('/proc', entry, 'stat'), 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
      } catch {
        return false;
      }
    })
    .map(Number);
}
