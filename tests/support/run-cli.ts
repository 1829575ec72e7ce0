import type { ChildProcessByStdio } from 'node:child_process';
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
