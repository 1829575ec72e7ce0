import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { freePort, ownedTempDir, serverIdentity } from './server-user.js';

/**
 * A throwaway PgBouncer in transaction pooling mode in front of a test PostgreSQL server
 * (tests/support/postgres-server.ts): every database of that server, as `postgres` (trust), with
 * a pool of `poolSize` server connections per database — fewer than a store's pool, so that
 * several client connections really share each backend, one transaction at a time.
 */
export interface PgBouncer {
  readonly port: number;
  /** Connection string of `database` through PgBouncer. */
  urlFor(database: string): string;
  /** Stops PgBouncer (SIGINT: it closes its connections at once) and deletes its directory. */
  stop(): Promise<void>;
}

export interface StartPgBouncerOptions {
  /**
   * The PostgreSQL server, as a URL (its database part is ignored): PgBouncer connects to its host
   * and port as its user, with its password if it has one. Clients connect to PgBouncer as that
   * user, without a password.
   */
  readonly server: string;
  /** `default_pool_size`: server connections per database (default 4). */
  readonly poolSize?: number;
}

/** Where Debian's package puts the binary. */
const DEBIAN_BIN = '/usr/sbin/pgbouncer';

const INSTALL_HINT =
  'Install PgBouncer (Debian/Ubuntu: apt-get install pgbouncer) or set PGBOUNCER_BIN to its binary; ' +
  'the PgBouncer suite (npm run test:pgbouncer) runs the store conformance suite and a chaos run through it.';

/**
 * PgBouncer's binary: `PGBOUNCER_BIN`, else /usr/sbin/pgbouncer or `pgbouncer` on the PATH. When
 * there is none, as root on a machine with apt-get, installs Debian's `pgbouncer` package (its
 * service is not started: the test runs its own); otherwise fails saying what to install.
 */
export function findPgBouncer(): string {
  const fromEnv = process.env['PGBOUNCER_BIN'];
  if (fromEnv) {
    if (!existsSync(fromEnv)) throw new Error(`PGBOUNCER_BIN=${fromEnv} does not exist. ${INSTALL_HINT}`);
    return fromEnv;
  }
  const found = locate();
  if (found !== undefined) return found;
  const canInstall = process.getuid?.() === 0 && existsSync('/usr/bin/apt-get');
  if (!canInstall) throw new Error(`No pgbouncer binary found. ${INSTALL_HINT}`);
  try {
    // policy-rc.d-less machines would start the packaged service; RUNLEVEL=1 keeps invoke-rc.d from it.
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive', RUNLEVEL: '1' };
    process.stderr.write(
      "pgbouncer not found: installing Debian's pgbouncer package (apt-get install -y pgbouncer)…\n",
    );
    try {
      execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'pgbouncer'], { stdio: 'pipe', env });
    } catch {
      // The package lists may be missing (a fresh container): fetch them once and try again.
      execFileSync('apt-get', ['update'], { stdio: 'pipe', env });
      execFileSync('apt-get', ['install', '-y', '--no-install-recommends', 'pgbouncer'], { stdio: 'pipe', env });
    }
  } catch (error) {
    const output = (error as { stderr?: Buffer }).stderr?.toString().trim();
    throw new Error(
      `No pgbouncer binary found, and apt-get install pgbouncer failed${output ? `:\n${output}` : ''}\n${INSTALL_HINT}`,
      { cause: error },
    );
  }
  const installed = locate();
  if (installed === undefined)
    throw new Error(`apt-get installed pgbouncer, but no binary is at ${DEBIAN_BIN} or on the PATH. ${INSTALL_HINT}`);
  return installed;
}

function locate(): string | undefined {
  if (existsSync(DEBIAN_BIN)) return DEBIAN_BIN;
  try {
    const onPath = execFileSync('sh', ['-c', 'command -v pgbouncer'], { stdio: 'pipe' }).toString().trim();
    return onPath === '' ? undefined : onPath;
  } catch {
    return undefined;
  }
}

/** The version line of `pgbouncer --version` ("PgBouncer 1.18.0"). */
export function pgBouncerVersion(bin: string = findPgBouncer()): string {
  return execFileSync(bin, ['--version'], { stdio: 'pipe' }).toString().split('\n')[0]!.trim();
}

/**
 * Starts PgBouncer on a free port. It refuses to run as root, so as root it runs as `postgres`
 * (`PG_RUN_AS`), as the test server does, from a directory that user owns.
 */
export async function startPgBouncer(options: StartPgBouncerOptions): Promise<PgBouncer> {
  const bin = findPgBouncer();
  const identity = serverIdentity();
  const dir = ownedTempDir('ledgerflow-pgbouncer-', identity);
  const port = await freePort();
  const config = join(dir, 'pgbouncer.ini');
  const server = new URL(options.server);
  const user = decodeURIComponent(server.username) || 'postgres';
  const password = decodeURIComponent(server.password);
  const quoted = (value: string): string => `'${value.replace(/'/g, "''")}'`;
  const serverInfo = [
    `host=${server.hostname}`,
    `port=${server.port || '5432'}`,
    `user=${quoted(user)}`,
    ...(password ? [`password=${quoted(password)}`] : []),
  ].join(' ');
  writeFileSync(join(dir, 'userlist.txt'), `"${user.replace(/"/g, '""')}" ""\n`);
  writeFileSync(
    config,
    [
      '[databases]',
      // Every database of the server, under its own name, with a pool of its own.
      `* = ${serverInfo}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${options.poolSize ?? 4}`,
      'min_pool_size = 0',
      'reserve_pool_size = 0',
      'max_client_conn = 2000',
      // A server connection goes back to the pool as its transaction ends, with nothing reset:
      // what a session left on it (a prepared statement, a LISTEN) meets the next client.
      'server_reset_query =',
      'server_check_delay = 1',
      // Short, so that a server restart is noticed quickly by pgbouncer and the clients it serves.
      'server_connect_timeout = 5',
      'server_login_retry = 1',
      'ignore_startup_parameters = extra_float_digits',
      `admin_users = ${user}`,
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
      'log_connections = 0',
      'log_disconnections = 0',
      'log_pooler_errors = 1',
      '',
    ].join('\n'),
  );
  if (identity.uid !== undefined) {
    for (const file of ['pgbouncer.ini', 'userlist.txt']) chownSync(join(dir, file), identity.uid, identity.gid!);
  }

  const child: ChildProcess = spawn(bin, [config], { stdio: ['ignore', 'ignore', 'pipe'], cwd: dir, ...identity });
  let log = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-4000);
  });
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  const urlFor = (database: string): string => `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${database}`;
  const stop = async (): Promise<void> => {
    process.off('exit', killOnExit);
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  // Ready once its admin console answers (it needs no server connection).
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`PgBouncer exited during start-up:\n${log}`);
    }
    try {
      const client = new pg.Client({ connectionString: urlFor('pgbouncer') });
      client.on('error', () => {});
      await client.connect();
      await client.query('SHOW VERSION');
      await client.end();
      break;
    } catch (error) {
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`PgBouncer did not accept connections within 15 s:\n${log}`, { cause: error });
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return { port, urlFor, stop };
}
