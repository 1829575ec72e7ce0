import type { CliIo } from '../../runtime/cli/cli-io.js';
import { main } from '../../runtime/cli/main.js';

/** What a CLI invocation returned and printed. */
export interface CliOutcome {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** `main()` in this process with captured output: the CLI's own code path, without a process start per call. */
export async function runCli(args: readonly string[]): Promise<CliOutcome> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = { out: (t) => void (stdout += t), err: (t) => void (stderr += t) };
  const code = await main(args, io);
  return { code, stdout, stderr };
}
