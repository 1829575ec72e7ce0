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
