import { spawn, type ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import type { CliIo } from '../../runtime/cli/cli-io.js';
import { main as codegenMain } from '../../codegen/cli/main.js';
import { main } from '../../runtime/cli/main.js';

/** What a CLI invocation returned and printed. */
export interface CliOutcome {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * `main()` in this process with captured output: the CLI's own code path, without a process start
 * per call. `codegen` goes to codegen's own main, as bin/ledgerflow.js sends it.
 */
export async function runCli(args: readonly string[]): Promise<CliOutcome> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = { out: (t) => void (stdout += t), err: (t) => void (stderr += t) };
  const code = args[0] === 'codegen' ? await codegenMain(args.slice(1), io) : await main(args, io);
  return { code, stdout, stderr };
}

/** What a child process (started with piped stdout and stderr) printed, and its exit code (-1 for a signal). */
export function outcomeOf(child: ChildProcessByStdio<null, Readable, Readable>): Promise<CliOutcome> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

/**
 * Starts a long-running shell command line (e.g. a worker, through npx or not) in its own process
 * group, waits until its stdout matches `until`, then sends SIGTERM to the whole group (npx and
 * the node process it started) and returns how it exited. After `timeoutMs` it stops it anyway.
 */
export function runUntil(
  line: string,
  options: {
    readonly cwd: string;
    readonly env: NodeJS.ProcessEnv;
    readonly until: RegExp;
    readonly timeoutMs?: number;
  },
): Promise<CliOutcome> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', `exec ${line}`], {
      cwd: options.cwd,
      env: options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    let signalled = false;
    const stop = (): void => {
      if (signalled) return;
      signalled = true;
      process.kill(-child.pid!, 'SIGTERM');
    };
    const timer = setTimeout(stop, options.timeoutMs ?? 30_000);
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (options.until.test(stdout)) stop();
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
}
