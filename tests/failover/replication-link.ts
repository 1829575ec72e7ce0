import { createServer, Socket, type AddressInfo } from 'node:net';

/**
 * The network between a primary and its standby: a TCP relay the standby's `primary_conninfo`
 * points at, which the failover test cuts to partition the standby from the primary (the
 * classic prelude to a failover: the primary keeps serving the clients that still reach it).
 */
export interface ReplicationLink {
  readonly port: number;
  /** Drops every connection and refuses new ones: the standby receives nothing more. */
  cut(): void;
  close(): Promise<void>;
}

export async function startReplicationLink(upstreamPort: number): Promise<ReplicationLink> {
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
    upstream.connect(upstreamPort, '127.0.0.1');
    downstream.pipe(upstream);
    upstream.pipe(downstream);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const cutOff = (): void => {
    cut = true;
    for (const socket of sockets) socket.destroy();
  };
  return {
    port: (server.address() as AddressInfo).port,
    cut: cutOff,
    close() {
      cutOff();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
