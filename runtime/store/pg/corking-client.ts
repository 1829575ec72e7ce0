import type { Duplex } from 'node:stream';
import type pg from 'pg';
import { overrideQuery } from './client-query.js';

/**
 * `Base` whose statements sent in one synchronous stretch leave in one socket write. On a
 * pipelining connection node-postgres writes each statement as it is handed one (its own cork
 * covers one extended-protocol statement's messages, and a simple-protocol statement is not
 * corked at all): a transactional step's opening burst — BEGIN with its settings, the start's
 * insert, the ledger row — went out as three writes, its commit burst as two. Each write to a
 * TCP socket is a system call that on loopback also delivers the segment and wakes the server
 * (`writev` was a fifth of the worker's main-thread time in the profiles of the three-step drain).
 *
 * The first `query()` of a stretch corks the connection's socket and queues a microtask that
 * uncorks it: everything submitted before that microtask runs — the statements `#send` hands the
 * connection one after another, synchronously — leaves in one `writev`. The write waits for
 * nothing but the end of the current synchronous code. A statement node-postgres holds back
 * (the connection not yet ready) is written when it is submitted, uncorked, as before.
 */
export function corkingClient(Base: typeof pg.Client): typeof pg.Client {
  const corked = new WeakSet<Duplex>();
  const uncork = (stream: Duplex) => {
    corked.delete(stream);
    stream.uncork();
  };
  return overrideQuery(
    Base,
    (query) =>
      function corkedQuery(config, values, callback) {
        const stream = (this as unknown as { connection?: { stream?: Duplex } }).connection?.stream;
        if (stream !== undefined && !corked.has(stream) && stream.writable) {
          corked.add(stream);
          stream.cork();
          queueMicrotask(() => uncork(stream));
        }
        return query.call(this, config, values, callback);
      },
  );
}
