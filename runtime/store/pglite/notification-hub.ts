import type { PGlite } from '@electric-sql/pglite';

type Listener = (payload: string) => void;

interface Channel {
  readonly listeners: Set<Listener>;
  /** Settles once the session listens: to PGlite's unlisten function, or undefined if LISTEN failed. */
  readonly listening: Promise<(() => Promise<void>) | undefined>;
  /** The same function once `listening` settled, so that UNLISTEN is queued at once, in order. */
  unlisten?: () => Promise<void>;
}

/**
 * Who hears a NOTIFY on the embedded database. PGlite is one session: every LISTEN is that
 * session's, and a notification comes out in the answer of whatever ran the committing statement.
 * For statements run in process, PGlite parses its answer and calls what `pglite.listen`
 * registered; for statements a client of the dev server's bridge runs, the answer goes to that
 * client, and the bridge hands the notifications it finds there to {@link dispatch}. Either way
 * every subscriber of the channel hears it once — in-process listeners and bridge clients alike —
 * and the session LISTENs on a channel exactly while somebody here subscribes to it, so one
 * client's UNLISTEN never silences another's subscription.
 */
export class NotificationHub {
  readonly #channels = new Map<string, Channel>();

  /**
   * @param betweenTransactions runs LISTEN and UNLISTEN when the session is not inside anybody's
   * transaction (whose rollback would undo them silently)
   */
  constructor(
    private readonly pglite: PGlite,
    private readonly betweenTransactions: <T>(run: () => Promise<T>) => Promise<T>,
  ) {}

  /** Subscribes `listener` to `channel`; resolves once the session listens, to the unsubscribe function. */
  async subscribe(channel: string, listener: Listener): Promise<() => void> {
    let entry = this.#channels.get(channel);
    if (entry === undefined) {
      const quoted = `"${channel.replaceAll('"', '""')}"`;
      const listening = this.betweenTransactions(() =>
        this.pglite.listen(quoted, (payload) => this.dispatch(channel, payload)),
      );
      const created: Channel = { listeners: new Set([listener]), listening: listening.catch(() => undefined) };
      entry = created;
      this.#channels.set(channel, created);
      try {
        created.unlisten = await listening;
      } catch (error) {
        this.#channels.delete(channel);
        throw error;
      }
    } else {
      entry.listeners.add(listener);
      await entry.listening;
    }
    const subscribed = entry;
    return () => {
      if (!subscribed.listeners.delete(listener) || subscribed.listeners.size > 0) return;
      if (this.#channels.get(channel) === subscribed) this.#channels.delete(channel);
      // Queued behind whoever holds the session rather than awaited, as a stopping worker must not
      // wait for a transaction it may be about to abort; closing the store drains the queue.
      const unlisten = subscribed.unlisten;
      if (unlisten !== undefined) this.betweenTransactions(() => unlisten()).catch(() => {});
      else
        void subscribed.listening
          .then((pending) => pending && this.betweenTransactions(() => pending()))
          .catch(() => {});
    };
  }

  /** Delivers a notification to every subscriber of its channel (none: dropped). */
  dispatch(channel: string, payload: string): void {
    for (const listener of this.#channels.get(channel)?.listeners ?? []) listener(payload);
  }
}
