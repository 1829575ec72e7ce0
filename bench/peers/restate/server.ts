import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * A Restate server for one measurement, started by bench/peers/main.ts: the binary that
 * `@restatedev/restate-server` installs from the registry (bench/peers/restate/node_modules),
 * as a child process with a fresh data directory and free loopback ports, with its defaults
 * otherwise (its log server fsyncs its write-ahead log). Restate keeps its journal and state in
 * that directory, not in PostgreSQL.
 */
export interface RestateServer {
  readonly ingressUrl: string;
  readonly adminUrl: string;
  /** Stops the server (SIGTERM, then SIGKILL after 10 s) and deletes its data directory. */
  stop(): Promise<void>;
}

const here = dirname(fileURLToPath(import.meta.url));

export async function startRestateServer(): Promise<RestateServer> {
  // A free port found here may be taken (an outgoing connection's ephemeral port) before the
  // server binds it: start again on new ports when that is why it exited.
  for (let tries = 1; ; tries++) {
    try {
      return await startOnFreePorts();
    } catch (error) {
      if (tries >= 3 || !String(error).includes('Address in use')) throw error;
    }
  }
}

async function startOnFreePorts(): Promise<RestateServer> {
  const binary = restateBinary();
  const dataDir = mkdtempSync(join(tmpdir(), 'ledgerflow-peers-restate-'));
  const [ingress, admin, fabric] = [await freePort(), await freePort(), await freePort()];
  const output: string[] = [];
  const child = spawn(binary, ['--no-logo', '--base-dir', dataDir, '--node-name', 'bench'], {
    env: {
      ...process.env,
      RESTATE_LISTEN_MODE: 'tcp',
      RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingress}`,
      RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${admin}`,
      RESTATE_BIND_ADDRESS: `127.0.0.1:${fabric}`,
      RESTATE_ADVERTISED_ADDRESS: `http://127.0.0.1:${fabric}`,
      RESTATE_DISABLE_TELEMETRY: 'true',
      RESTATE_LOG_FILTER: 'warn',
      RESTATE_LOG_DISABLE_ANSI_CODES: 'true',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const remember = (chunk: Buffer): void => {
    output.push(chunk.toString());
    if (output.length > 50) output.shift();
  };
  child.stdout?.on('data', remember);
  child.stderr?.on('data', remember);
  const server: RestateServer = {
    ingressUrl: `http://127.0.0.1:${ingress}`,
    adminUrl: `http://127.0.0.1:${admin}`,
    stop: async () => {
      await stopChild(child);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    await waitHealthy(child, [`${server.adminUrl}/health`, `${server.ingressUrl}/restate/health`], output);
    return server;
  } catch (error) {
    await server.stop();
    throw error;
  }
}

/** The platform's binary, resolved the way the package's own launcher does (without the launcher's extra node process). */
function restateBinary(): string {
  const require = createRequire(join(here, 'package.json'));
  try {
    return require.resolve(`@restatedev/restate-server-${platform()}-${arch()}/bin/restate-server`);
  } catch {
    throw new Error(
      `No Restate server binary for ${platform()}-${arch()} in bench/peers/restate/node_modules: run npm ci --prefix bench/peers/restate.`,
    );
  }
}

async function waitHealthy(child: ChildProcess, urls: readonly string[], output: readonly string[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (const url of urls) {
    for (;;) {
      if (child.exitCode !== null)
        throw new Error(`restate-server exited with ${child.exitCode} before it was healthy:\n${output.join('')}`);
      const ok = await fetch(url).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline)
        throw new Error(`restate-server not healthy at ${url} after 60 s:\n${output.join('')}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

/** A loopback port free right now (the OS picks it; the server binds it a moment later). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}
