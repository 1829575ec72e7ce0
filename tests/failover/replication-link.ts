import { createServer, Socket, type AddressInfo } from 'node:net';

/**
 * A stretch of network: a TCP relay that can be cut and mended. The failover test points the
 * standby's `primary_conninfo` at one and cuts it to partition the standby from the primary (the
 * classic prelude to a failover: the primary keeps serving the clients that still reach it). The
 * HA-manager test puts one in front of every address of a node — its PostgreSQL port, which
 * clients, the other node and the manager's monitor reach it by, and its way to the monitor — so
 * cutting them is cutting the node off the network (no iptables needed).
 */
export interface ReplicationLink {
  readonly host: string;
  readonly port: number;
  /** Drops every connection and refuses new ones: nothing gets through. */
  cut(): void;
  /** Lets new connections through again (the ones cut stay cut, as after a real partition). */
  restore(): void;
  close(): Promise<void>;
}

export interface LinkOptions {
  /** Where the relay forwards to (default 127.0.0.1). */
  readonly upstreamHost?: string;
  /** The address the relay listens on (default 127.0.0.1); any of 127.0.0.0/8 on Linux. */
  readonly listenHost?: string;
  /** Its port (default: one the system picks). */
  readonly listenPort?: number;
}

export async function startReplicationLink(upstreamPort: number, options: LinkOptions = {}): Promise<ReplicationLink> {
  const upstreamHost = options.upstreamHost ?? '127.0.0.1';
  const listenHost = options.listenHost ?? '127.0.0.1';
  const sockets = new Set<Socket>();
  let cut = false;
  const server = createServer((downstream) => {
    if (cut) {
      downstream.destroy();
      return;
    }
    const upstream = new Socket();
    for (const socket of [downstream, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => {
        sockets.delete(socket);
        downstream.destroy();
        upstream.destroy();
      });
    }
    // From 127.0.0.1, whatever address the relay listens on: what initdb's pg_hba.conf trusts.
    upstream.connect({ port: upstreamPort, host: upstreamHost, localAddress: '127.0.0.1' });
    downstream.pipe(upstream);
    upstream.pipe(downstream);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.listenPort ?? 0, listenHost, () => resolve());
  });
  const cutOff = (): void => {
    cut = true;
    for (const socket of sockets) socket.destroy();
  };
  return {
    host: listenHost,
    port: (server.address() as AddressInfo).port,
    cut: cutOff,
    restore() {
      cut = false;
    },
    close() {
      cutOff();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
