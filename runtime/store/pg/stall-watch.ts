import type pg from 'pg';

/**
 * Statements stuck on a connection whose far end is gone without a reset.
 *
 * A host that vanishes silently (a frozen machine, a black-holed network, a failover whose old
 * primary was never shut down cleanly) leaves every statement in flight on it waiting for TCP to
 * give up — on Linux about fifteen minutes, during which each such connection, and the worker
 * slot or client call waiting on it, is lost. Nothing on the connection itself can tell a dead
 * peer from a long statement (a lock wait, a big query): both are silence.
 *
 * So the store watches its own connections: a statement still running after `checkAfterMs` gets
 * its host asked, over a fresh connection, whether the backend serving it still exists
 * (`pg_stat_activity`, by the backend pid the connection was given at startup). A host that
 * cannot be reached, or that does not know the pid, means the connection is dead: its socket is
 * destroyed, and the statement fails at once as a lost connection — which every caller already
 * retries (a worker re-reads the run, a multi-host store finds the writable host). A backend that
 * is still there and running a statement is a long statement: it is left alone and asked about
 * again `checkAfterMs` later. A backend that is there but has been idle for {@link idleMarginMs}
 * while the client still waits on its statement means the connection itself went silent (only it
 * was black-holed, say by a middlebox that dropped its state): the statement never arrived or its
 * answer never came back. That connection is ended as well; whatever the statement did, if
 * anything, its caller settles as after any lost connection (an unknown commit is re-read).
 * One probe per host per check, only while some statement has run that long; nothing on the hot path.
 * Behind a pooler or proxy the pid a connection got at startup is not a backend's (the probe sees
 * its own differ from `pg_backend_pid()`), and only an unreachable host ends a connection.
 */
export interface StallWatchOptions {
  /** How long a statement runs before its host is asked about it. */
  readonly checkAfterMs: number;
  /**
   * Which of `pids` the host still has as backends, and which of those have run nothing for at
   * least `idleForMs` (by the host's clock), over a fresh connection; `'unreachable'` when no
   * connection could be made (the host is down or silent).
   */
  readonly probe: (
    host: WatchedHost,
    pids: readonly number[],
    idleForMs: number,
  ) => Promise<ProbeAnswer | 'unreachable'>;
  /** Told about each connection it ended (for tests and logs). */
  readonly onEnded?: (host: WatchedHost, pid: number) => void;
}

/** What a host says of the backends asked about. */
export interface ProbeAnswer {
  readonly alive: ReadonlySet<number>;
  /** Alive, running no statement, and for at least the margin asked for. */
  readonly idle: ReadonlySet<number>;
}

/**
 * How long a backend must have been idle, while its client still waits on a statement that has
 * run `checkAfterMs`, before the connection counts as silent: an answer the backend has just sent
 * is in flight for far less.
 */
export function idleMarginMs(checkAfterMs: number): number {
  return Math.min(checkAfterMs, 2_000);
}

export interface WatchedHost {
  readonly host: string;
  readonly port: number;
}

/** What a watched client exposes of node-postgres's internals: the statement in flight, the backend pid, the socket. */
interface ClientInternals {
  readonly _activeQuery: unknown;
  readonly processID: number | null;
  readonly host: string;
  readonly port: number;
  readonly connection: { readonly stream: { destroy(error?: Error): void } };
}

export class StallWatch {
  readonly #options: StallWatchOptions;
  readonly #clients = new Set<pg.Client>();
  /** The statement each client was running when first seen, and since when (performance.now()). */
  readonly #seen = new WeakMap<pg.Client, { statement: unknown; since: number }>();
  #timer: NodeJS.Timeout | undefined;
  #checking = false;

  constructor(options: StallWatchOptions) {
    this.#options = options;
  }

  add(client: pg.Client): void {
    this.#clients.add(client);
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => void this.check(), Math.max(100, Math.min(1_000, this.#options.checkAfterMs / 2)));
    this.#timer.unref();
  }

  remove(client: pg.Client): void {
    this.#clients.delete(client);
    if (this.#clients.size === 0) this.stop();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One pass: probes the hosts of statements that have run `checkAfterMs`, ends the dead ones. Exposed for tests. */
  async check(): Promise<void> {
    if (this.#checking) return;
    this.#checking = true;
    try {
      const now = performance.now();
      const stuck = new Map<string, { host: WatchedHost; clients: pg.Client[] }>();
      for (const client of this.#clients) {
        const internals = client as unknown as ClientInternals;
        const statement = internals._activeQuery;
        const seen = this.#seen.get(client);
        if (statement === null || statement === undefined || internals.processID === null) {
          this.#seen.delete(client);
        } else if (seen === undefined || seen.statement !== statement) {
          this.#seen.set(client, { statement, since: now });
        } else if (now - seen.since >= this.#options.checkAfterMs) {
          const key = `${internals.host}:${internals.port}`;
          const group = stuck.get(key) ?? { host: { host: internals.host, port: internals.port }, clients: [] };
          group.clients.push(client);
          stuck.set(key, group);
        }
      }
      await Promise.all([...stuck.values()].map((group) => this.#settle(group.host, group.clients)));
    } finally {
      this.#checking = false;
    }
  }

  async #settle(host: WatchedHost, clients: readonly pg.Client[]): Promise<void> {
    const statements = new Map(clients.map((c) => [c, (c as unknown as ClientInternals)._activeQuery]));
    const pids = clients.map((c) => (c as unknown as ClientInternals).processID!);
    const margin = idleMarginMs(this.#options.checkAfterMs);
    const answer = await this.#options.probe(host, pids, margin).catch(() => undefined);
    if (answer === undefined) return; // the probe itself failed for another reason: ask again next time
    for (const client of clients) {
      const internals = client as unknown as ClientInternals;
      // Finished while the host was asked: whatever it runs now has not been watched long enough.
      if (internals._activeQuery !== statements.get(client)) continue;
      const pid = internals.processID!;
      const why =
        answer === 'unreachable'
          ? 'the host could not be reached'
          : !answer.alive.has(pid)
            ? `the host no longer has its backend (pid ${pid})`
            : answer.idle.has(pid)
              ? `its backend (pid ${pid}) has been idle for over ${margin} ms: the statement or its answer was lost on the way`
              : undefined;
      if (why === undefined) {
        // A long statement: ask again after another checkAfterMs.
        this.#seen.set(client, { statement: internals._activeQuery, since: performance.now() });
        continue;
      }
      this.#seen.delete(client);
      this.#options.onEnded?.(host, pid);
      internals.connection.stream.destroy(
        new Error(
          `connection to ${host.host}:${host.port} ended by ledgerflow: its statement ran ${this.#options.checkAfterMs} ms and ${why}`,
        ),
      );
    }
  }
}
