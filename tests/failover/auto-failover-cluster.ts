import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import pg from 'pg';
import { findPostgresBin } from '../support/postgres-server.js';
import type { FailoverTarget } from './failover-run.js';
import { startReplicationLink, type ReplicationLink } from './replication-link.js';
import { freePort, ownedTempDir, serverIdentity } from '../support/server-user.js';

/**
 * A primary and a synchronous standby under pg_auto_failover (Debian's
 * `postgresql-<major>-auto-failover`: `pg_autoctl` and the `pgautofailover` extension), on this
 * machine: a monitor and two data nodes, each a `pg_autoctl run` (keeper plus PostgreSQL) in a
 * process group of its own, running as the `postgres` user in a temporary directory.
 *
 * Every node is on the network only through relays ({@link ReplicationLink}): its PostgreSQL
 * listens on 127.0.1.N and is registered with the monitor — so reached by the monitor's health
 * checks, by the other node's replication and by ledgerflow's multi-host URL — as 127.0.2.N, a
 * relay on the same port; its keeper reaches the monitor through a relay of its own. Cutting a
 * node's relays takes it off the network (established connections reset, new ones refused), with
 * its processes left running. The test itself reads a node directly on 127.0.1.N (the console).
 *
 * The manager's timeouts are cut from tens of seconds to a few (see {@link MONITOR_SETTINGS},
 * {@link KEEPER_SETTINGS}), keeping their order: an old primary that lost the monitor demotes
 * itself (`network_partition_timeout`, 2 s) well before the monitor lets the promoted standby
 * take writes (`primary_demote_timeout`, 6 s after it declared the primary unhealthy).
 */

/** Monitor settings: a node is declared unhealthy about 2 s after it stops answering. */
const MONITOR_SETTINGS: Readonly<Record<string, string>> = {
  'pgautofailover.health_check_period': '1000',
  // A refused or reset connection fails at once; the timeout only bounds a slow answer on a busy machine.
  'pgautofailover.health_check_timeout': '2000',
  'pgautofailover.health_check_max_retries': '1',
  'pgautofailover.health_check_retry_delay': '500',
  'pgautofailover.node_considered_unhealthy_timeout': '2000',
  'pgautofailover.startup_grace_period': '2000',
  // The promoted standby stays read-only (default_transaction_read_only) this long, so that an
  // old primary the monitor cannot reach has demoted itself first.
  'pgautofailover.primary_demote_timeout': '6000',
};

/** Keeper settings (`pg_autoctl config set`, seconds). */
const KEEPER_SETTINGS: Readonly<Record<string, string>> = {
  'timeout.network_partition_timeout': '2',
  'timeout.prepare_promotion_catchup': '5',
  'timeout.prepare_promotion_walreceiver': '2',
  'timeout.postgresql_restart_failure_timeout': '5',
};

/** What pg_autoctl computes from the machine's memory (GBs of shared_buffers) is too much for a test on a shared machine. */
const NODE_SETTINGS: Readonly<Record<string, string>> = { shared_buffers: '128MB', max_connections: '200' };

export const MONITOR_DB = 'pg_auto_failover';

/**
 * The path of `pg_autoctl` for the machine's PostgreSQL, installing Debian's package (as root,
 * through apt-get) when it is missing; throws saying what to install when it cannot.
 */
export function ensurePgAutoFailover(log: (line: string) => void): string {
  const pgBin = findPostgresBin();
  const major = basename(dirname(pgBin));
  const pkg = `postgresql-${major}-auto-failover`;
  let sharedir = `/usr/share/postgresql/${major}`;
  try {
    sharedir = execFileSync(join(pgBin, 'pg_config'), ['--sharedir'], { stdio: 'pipe' }).toString().trim();
  } catch {
    // No pg_config beside the server (it comes with the server package on Debian): Debian's layout.
  }
  const find = (): string | undefined => {
    if (!existsSync(join(sharedir, 'extension', 'pgautofailover.control'))) return undefined;
    return ['/usr/bin/pg_autoctl', join(pgBin, 'pg_autoctl')].find((path) => existsSync(path));
  };
  const found = find();
  if (found !== undefined) return found;
  const missing = `pg_auto_failover for PostgreSQL ${major} is not installed: apt-get install ${pkg} (Debian/Ubuntu).`;
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) {
    throw new Error(`${missing} The test installs it itself only when it runs as root on a machine with apt-get.`);
  }
  log(`installing ${pkg} (apt-get)`);
  const install = (): void => {
    execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', '-o', 'DPkg::Lock::Timeout=300', pkg], {
      stdio: 'pipe',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
  };
  try {
    try {
      install();
    } catch {
      execFileSync('apt-get', ['update', '-qq', '-o', 'DPkg::Lock::Timeout=300'], { stdio: 'pipe' });
      install();
    }
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim() ?? '';
    throw new Error(`${missing} apt-get could not install it: ${stderr || (error as Error).message}`, { cause: error });
  }
  const installed = find();
  if (installed === undefined)
    throw new Error(
      `${missing} apt-get install ${pkg} ran, but pg_autoctl or the pgautofailover extension is still missing.`,
    );
  return installed;
}

/** What the test sees of a node, read directly (not through its relays). */
export type NodeRole = 'down' | 'read-write' | 'read-only' | 'standby';

/** A session on a node: its backend pid, when it began (ms since the epoch), and `application_name wait_event: query`. */
export interface Session {
  readonly pid: number;
  readonly startedAt: number;
  readonly query: string;
}

interface DataNode {
  readonly name: string;
  readonly pgdata: string;
  /** Where its PostgreSQL listens (the test's direct way in). */
  readonly listenHost: string;
  /** Its address on the "network": a relay to `listenHost`, on the same port. */
  readonly host: string;
  readonly port: number;
  readonly inbound: ReplicationLink;
  readonly toMonitor: ReplicationLink;
  service: ChildProcess | undefined;
}

export interface AutoFailoverCluster {
  /** Multi-host URL of `database`, node A (the first primary) first. */
  urlFor(database: string): string;
  /** `database` on a node, directly. */
  directUrl(node: 'a' | 'b', database: string): string;
  /** `[name, reported state, goal state]` per node, from the monitor. */
  states(): Promise<Array<[string, string, string]>>;
  /** SIGKILLs a node's keeper, its PostgreSQL and every backend (its process group): the machine died. */
  killNode(node: 'a' | 'b'): void;
  /** Starts a killed node's `pg_autoctl run` again: the machine came back. */
  restartNode(node: 'a' | 'b'): void;
  /** Cuts every relay of the node: off the network, processes running. */
  cutNode(node: 'a' | 'b'): void;
  /** Mends them. */
  healNode(node: 'a' | 'b'): void;
  role(node: 'a' | 'b'): Promise<NodeRole>;
  /** The node's role, and its sessions whose application_name matches `pattern` (a POSIX regex): when each began, what it runs or waits for. */
  observe(node: 'a' | 'b', pattern: string): Promise<{ role: NodeRole; sessions: Session[] }>;
  /** The tail of a node's (or the monitor's) pg_autoctl log. */
  logTail(node: 'a' | 'b' | 'monitor', lines?: number): string;
  destroy(): Promise<void>;
}

/** Starts the monitor and nodes A (primary) and B (synchronous standby); resolves once A is primary with B in its quorum. */
export async function startAutoFailoverCluster(log: (line: string) => void): Promise<AutoFailoverCluster> {
  const started = Date.now();
  const pgAutoctl = ensurePgAutoFailover(log);
  const pgBin = findPostgresBin();
  const identity = serverIdentity();
  const base = ownedTempDir('ledgerflow-autofailover-', identity);
  const env = {
    PATH: `${pgBin}:/usr/bin:/bin`,
    HOME: base,
    XDG_CONFIG_HOME: join(base, 'config'),
    XDG_DATA_HOME: join(base, 'share'),
    XDG_RUNTIME_DIR: join(base, 'run'),
    LANG: 'C.UTF-8',
  };
  const services = new Map<string, ChildProcess>();
  const links: ReplicationLink[] = [];
  const logFile = (name: string): string => join(base, `${name}.log`);

  /** `pg_autoctl …` to completion (asynchronously: the relays it goes through run in this process). */
  const autoctl = (name: string, args: string[]): Promise<void> =>
    new Promise((resolve, reject) => {
      const child = spawn(pgAutoctl, args, {
        cwd: base,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
        ...identity,
      });
      let output = '';
      const collect = (chunk: Buffer): void => {
        output += chunk.toString();
        appendFileSync(logFile(name), chunk);
      };
      child.stdout?.on('data', collect);
      child.stderr?.on('data', collect);
      child.once('error', reject);
      child.once('exit', (code) =>
        code === 0
          ? resolve()
          : reject(
              new Error(
                `pg_autoctl ${args.slice(0, 2).join(' ')} (${name}) exited with ${code}:\n${output.slice(-3_000)}`,
              ),
            ),
      );
    });

  /** `pg_autoctl run` for a data directory, as a process group of its own. */
  const run = (name: string, pgdata: string): ChildProcess => {
    const out = logFile(name);
    const child = spawn(pgAutoctl, ['run', '--pgdata', pgdata], {
      cwd: base,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      ...identity,
    });
    child.stdout?.on('data', (chunk: Buffer) => appendFileSync(out, chunk));
    child.stderr?.on('data', (chunk: Buffer) => appendFileSync(out, chunk));
    child.on('error', () => {});
    services.set(name, child);
    return child;
  };

  const killGroup = (child: ChildProcess | undefined): void => {
    if (child?.pid === undefined) return;
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  };

  const appendSettings = (pgdata: string, settings: Readonly<Record<string, string>>): void => {
    appendFileSync(
      join(pgdata, 'postgresql.auto.conf'),
      Object.entries(settings)
        .map(([k, v]) => `${k} = '${v}'\n`)
        .join(''),
    );
  };

  const monitorPort = await freePort();
  const monitorUrl = `postgres://postgres@127.0.0.1:${monitorPort}/${MONITOR_DB}`;
  const nodes = new Map<'a' | 'b', DataNode>();
  const exitHook = (): void => {
    for (const child of services.values()) killGroup(child);
  };
  process.once('exit', exitHook);

  const destroy = async (): Promise<void> => {
    for (const child of services.values()) killGroup(child);
    // LEDGERFLOW_AUTOFAILOVER_LOGS=<dir> keeps the monitor's and the nodes' pg_autoctl logs.
    const keepLogs = process.env['LEDGERFLOW_AUTOFAILOVER_LOGS'];
    if (keepLogs) {
      mkdirSync(keepLogs, { recursive: true });
      for (const name of ['monitor', 'a', 'b'])
        if (existsSync(logFile(name))) copyFileSync(logFile(name), join(keepLogs, `${basename(base)}-${name}.log`));
    }
    await Promise.all(
      [...services.values()].map((child) =>
        child.exitCode !== null || child.signalCode !== null
          ? undefined
          : new Promise((resolve) => child.once('exit', resolve)),
      ),
    );
    // pg_autoctl's postgres runs in the same process group, but be sure no postmaster outlives the test.
    for (const dir of ['monitor', 'a', 'b']) {
      const pidFile = join(base, dir, 'postmaster.pid');
      if (!existsSync(pidFile)) continue;
      const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
      try {
        if (pid > 0 && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(join(base, dir)))
          process.kill(pid, 'SIGKILL');
      } catch {
        // Not running.
      }
    }
    await Promise.all(links.map((link) => link.close().catch(() => {})));
    process.removeListener('exit', exitHook);
    rmSync(base, { recursive: true, force: true });
  };

  const monitorQuery = async <R extends pg.QueryResultRow>(text: string): Promise<R[]> => {
    const client = new pg.Client({ connectionString: monitorUrl, connectionTimeoutMillis: 2_000 });
    client.on('error', () => {});
    await client.connect();
    try {
      return (await client.query<R>(text)).rows;
    } finally {
      await client.end().catch(() => {});
    }
  };
  const states = async (): Promise<Array<[string, string, string]>> =>
    (
      await monitorQuery<{ nodename: string; reportedstate: string; goalstate: string }>(
        'SELECT nodename, reportedstate::text, goalstate::text FROM pgautofailover.node ORDER BY nodeid',
      )
    ).map((r) => [r.nodename, r.reportedstate, r.goalstate]);
  const waitForStates = async (want: Record<string, string>, timeoutMs: number): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    let last: Array<[string, string, string]> = [];
    for (;;) {
      try {
        last = await states();
        if (
          Object.entries(want).every(([name, state]) =>
            last.some(([n, reported, goal]) => n === name && reported === state && goal === state),
          )
        )
          return;
      } catch {
        // The monitor is starting.
      }
      if (Date.now() > deadline) {
        throw new Error(
          `pg_auto_failover did not reach ${JSON.stringify(want)} within ${timeoutMs / 1000} s: ${JSON.stringify(last)}\n` +
            ['monitor', 'a', 'b'].map((n) => `--- ${n}:\n${tail(logFile(n), 25)}`).join('\n'),
        );
      }
      await sleep(200);
    }
  };

  const node = (name: 'a' | 'b'): DataNode => {
    const found = nodes.get(name);
    if (found === undefined) throw new Error(`no node ${name}`);
    return found;
  };

  const directQuery = async <R extends pg.QueryResultRow>(name: 'a' | 'b', text: string): Promise<R[]> => {
    const client = new pg.Client({
      connectionString: cluster.directUrl(name, 'postgres'),
      connectionTimeoutMillis: 1_000,
    });
    client.on('error', () => {});
    await client.connect();
    try {
      return (await client.query<R>(text)).rows;
    } finally {
      await client.end().catch(() => {});
    }
  };

  const cluster: AutoFailoverCluster = {
    urlFor: (database) => {
      const [a, b] = [node('a'), node('b')];
      return `postgres://postgres@${a.host}:${a.port},${b.host}:${b.port}/${database}?target_session_attrs=read-write`;
    },
    directUrl: (name, database) => `postgres://postgres@${node(name).listenHost}:${node(name).port}/${database}`,
    states,
    killNode(name) {
      killGroup(node(name).service);
    },
    restartNode(name) {
      const n = node(name);
      n.service = run(name, n.pgdata);
    },
    cutNode(name) {
      node(name).inbound.cut();
      node(name).toMonitor.cut();
    },
    healNode(name) {
      node(name).inbound.restore();
      node(name).toMonitor.restore();
    },
    async role(name) {
      try {
        const [row] = await directQuery<{ recovery: boolean; read_only: string }>(
          name,
          `SELECT pg_is_in_recovery() AS recovery, current_setting('default_transaction_read_only') AS read_only`,
        );
        if (row === undefined) return 'down';
        return row.recovery ? 'standby' : row.read_only === 'on' ? 'read-only' : 'read-write';
      } catch {
        return 'down';
      }
    },
    async observe(name, pattern) {
      try {
        const [row] = await directQuery<{ recovery: boolean; read_only: string; sessions: Session[] | null }>(
          name,
          `SELECT pg_is_in_recovery() AS recovery, current_setting('default_transaction_read_only') AS read_only,
                  (SELECT json_agg(json_build_object('pid', pid, 'startedAt', (extract(epoch FROM backend_start) * 1000)::bigint,
                                                    'query', application_name || ' ' || coalesce(wait_event, state, '') || ': ' || left(query, 60))) FROM pg_stat_activity
                    WHERE application_name ~ '${pattern.replaceAll("'", "''")}') AS sessions`,
        );
        if (row === undefined) return { role: 'down', sessions: [] };
        return {
          role: row.recovery ? 'standby' : row.read_only === 'on' ? 'read-only' : 'read-write',
          sessions: row.sessions ?? [],
        };
      } catch {
        return { role: 'down', sessions: [] };
      }
    },
    logTail: (name, lines = 40) => tail(logFile(name), lines),
    destroy,
  };

  try {
    // The monitor.
    const monitorData = join(base, 'monitor');
    await autoctl('monitor', [
      'create',
      'monitor',
      '--pgdata',
      monitorData,
      '--pgport',
      String(monitorPort),
      '--hostname',
      '127.0.0.1',
      '--auth',
      'trust',
      '--no-ssl',
      '--pgctl',
      join(pgBin, 'pg_ctl'),
    ]);
    appendSettings(monitorData, { ...MONITOR_SETTINGS, shared_buffers: '32MB' });
    run('monitor', monitorData);

    // The data nodes, one after the other: B is a pg_basebackup of A.
    for (const [index, name] of (['a', 'b'] as const).entries()) {
      const port = await freePort();
      const listenHost = `127.0.1.${index + 1}`;
      const inbound = await startReplicationLink(port, {
        upstreamHost: listenHost,
        listenHost: `127.0.2.${index + 1}`,
        listenPort: port,
      });
      const toMonitor = await startReplicationLink(monitorPort, { listenHost: `127.0.3.${index + 1}` });
      links.push(inbound, toMonitor);
      const pgdata = join(base, name);
      nodes.set(name, { name, pgdata, listenHost, host: inbound.host, port, inbound, toMonitor, service: undefined });
      await autoctl(name, [
        'create',
        'postgres',
        '--pgdata',
        pgdata,
        '--pgctl',
        join(pgBin, 'pg_ctl'),
        '--pgport',
        String(port),
        '--listen',
        listenHost,
        '--hostname',
        inbound.host,
        '--name',
        `node_${name}`,
        '--no-ssl',
        '--skip-pg-hba',
        '--monitor',
        `postgres://autoctl_node@${toMonitor.host}:${toMonitor.port}/${MONITOR_DB}?sslmode=disable`,
      ]);
      if (name === 'a') appendSettings(pgdata, NODE_SETTINGS); // B's copy of A has them.
      for (const [key, value] of Object.entries(KEEPER_SETTINGS))
        await autoctl(name, ['config', 'set', '--pgdata', pgdata, key, value]);
      node(name).service = run(name, pgdata);
      await waitForStates(name === 'a' ? { node_a: 'single' } : { node_a: 'primary', node_b: 'secondary' }, 90_000);
    }
    log(
      `pg_auto_failover: monitor on ${monitorPort}, node_a primary on ${node('a').host}:${node('a').port}, node_b synchronous standby on ${node('b').host}:${node('b').port}, in ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
    return cluster;
  } catch (error) {
    await destroy().catch(() => {});
    throw error;
  }
}

/** `cluster` as a {@link FailoverTarget}: node A fails (`kill` or `cut`), and the monitor promotes node B. */
export async function autoFailoverTarget(options: {
  readonly failure: 'kill' | 'cut';
  readonly log: (line: string) => void;
}): Promise<FailoverTarget> {
  const cluster = await startAutoFailoverCluster(options.log);
  try {
    const admin = new pg.Client({ connectionString: cluster.directUrl('a', 'postgres') });
    await admin.connect();
    try {
      await admin.query('CREATE DATABASE failover');
    } finally {
      await admin.end();
    }
  } catch (error) {
    await cluster.destroy().catch(() => {});
    throw error;
  }

  // What the test sees of the old primary, directly, from the failure to the end: its role over
  // time, and whether a worker or the client opened a connection to it after the failure.
  const timeline: Array<{ at: number; role: NodeRole }> = [];
  const promotedTimeline: Array<{ at: number; role: NodeRole }> = [];
  let watching = false;
  let watcher: Promise<void> | undefined;
  let failedAt = 0;
  let writableAt = 0;
  // Its ledgerflow sessions (by pid), with its role when each was first seen: those from before
  // the failure, and any a worker or the client opened once it was back (a standby is probed and
  // left; a read-write old primary would be used).
  const seenSessions = new Map<number, Session & { role: NodeRole }>();
  const watch = async (): Promise<void> => {
    while (watching) {
      const { role, sessions } = await cluster.observe('a', '^(ledgerflow-failover-|failover-controller)');
      for (const session of sessions)
        if (!seenSessions.has(session.pid)) seenSessions.set(session.pid, { ...session, role });
      if (timeline.at(-1)?.role !== role) timeline.push({ at: Date.now(), role });
      const promotedRole = await cluster.role('b');
      if (promotedTimeline.at(-1)?.role !== promotedRole) promotedTimeline.push({ at: Date.now(), role: promotedRole });
      await sleep(100);
    }
  };

  return {
    databaseUrl: cluster.urlFor('failover'),
    standbyUrl: cluster.directUrl('b', 'failover'),
    async fail() {
      // On a starved machine the monitor could have failed over on its own; then this run would test nothing.
      const before = await cluster.states();
      if (!before.some(([n, reported, goal]) => n === 'node_a' && reported === 'primary' && goal === 'primary')) {
        throw new Error(
          `node_a is no longer the primary before the test failed it (the monitor acted on its own): ${JSON.stringify(before)}`,
        );
      }
      watching = true;
      watcher = watch();
      failedAt = Date.now();
      if (options.failure === 'kill') cluster.killNode('a');
      else cluster.cutNode('a');
      return { cutAt: failedAt, killAt: failedAt };
    },
    async promote() {
      // The monitor promotes node B; it is read-only until the old primary's demote timeout passed.
      const deadline = Date.now() + 120_000;
      while ((await cluster.role('b')) !== 'read-write') {
        if (Date.now() > deadline) {
          throw new Error(
            `pg_auto_failover did not promote node_b within 120 s: ${JSON.stringify(await cluster.states().catch(String))}\n${cluster.logTail('monitor')}`,
          );
        }
        await sleep(50);
      }
      writableAt = Date.now();
    },
    async aftermath() {
      // The old primary comes back: restarted (kill), or on the network again (cut); the workers
      // still run. Until the monitor has it a secondary again and node B a primary with it in its
      // quorum (synchronous again), or 90 s.
      const backAt = Date.now();
      const roleAtReturn = timeline.at(-1)?.role ?? 'down';
      if (options.failure === 'kill') cluster.restartNode('a');
      else cluster.healNode('a');
      let final: Array<[string, string, string]> = [];
      const deadline = Date.now() + 90_000;
      for (;;) {
        final = await cluster.states().catch(() => final);
        const is = (name: string, state: string): boolean =>
          final.some(([n, reported, goal]) => n === name && reported === state && goal === state);
        if (
          (is('node_a', 'secondary') && is('node_b', 'primary') && timeline.at(-1)?.role === 'standby') ||
          Date.now() > deadline
        )
          break;
        await sleep(200);
      }
      const rejoinedAt = Date.now();
      watching = false;
      await watcher;
      const seconds = (at: number): string => `${((at - failedAt) / 1000).toFixed(1)}s`;
      // How long the old primary was writable once reachable again (from its return to its next role).
      const writableAfterReturn = timeline.reduce((ms, t, i) => {
        if (t.role !== 'read-write') return ms;
        const end = timeline[i + 1]?.at ?? rejoinedAt;
        return end <= backAt ? ms : ms + (end - Math.max(t.at, backAt));
      }, 0);
      return (
        `kill-to-writable=${seconds(writableAt)} old-primary: ${timeline.map((t) => `${t.role}@${seconds(t.at)}`).join(' → ')} ` +
        `(${options.failure === 'kill' ? 'restarted' : 'network back'} at ${seconds(backAt)}, was ${roleAtReturn}; ` +
        `writable-after-return=${(writableAfterReturn / 1000).toFixed(1)}s; ` +
        `ledgerflow-sessions-left-from-before-the-failure=${describeSessions(
          [...seenSessions.values()].filter((x) => x.startedAt < backAt),
          false,
        )}; ` +
        `ledgerflow-connections-opened-after-it-came-back=${describeSessions(
          [...seenSessions.values()].filter((x) => x.startedAt >= backAt),
          true,
        )}; monitor at ${seconds(rejoinedAt)}: ${final.map(([n, r, g]) => `${n}=${r}/${g}`).join(' ')}) ` +
        `new-primary: ${promotedTimeline.map((t) => `${t.role}@${seconds(t.at)}`).join(' → ')}`
      );
    },
    async close() {
      watching = false;
      await watcher;
      await cluster.destroy();
    },
  };
}

/** `0`, or `3 (while standby: 3)` — with, for `byRole`, what those seen while it was writable ran — or `2 [COMMIT waiting on SyncRep, …]`. */
function describeSessions(sessions: ReadonlyArray<Session & { role: NodeRole }>, byRole: boolean): string {
  if (sessions.length === 0) return '0';
  const short = (s: Session): string => JSON.stringify(s.query.replace(/\s+/g, ' ').slice(0, 70));
  if (!byRole) return `${sessions.length} [${sessions.map(short).join(', ')}]`;
  const roles = new Map<NodeRole, number>();
  for (const { role } of sessions) roles.set(role, (roles.get(role) ?? 0) + 1);
  const writable = sessions.filter((s) => s.role === 'read-write').map(short);
  return (
    `${sessions.length} (${[...roles].map(([role, n]) => `while ${role}: ${n}`).join(', ')})` +
    (writable.length > 0 ? ` while read-write: ${writable.join(', ')}` : '')
  );
}

function tail(file: string, lines: number): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/** A port free on every address (PostgreSQL and a relay each take it, on two loopback addresses). */

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
