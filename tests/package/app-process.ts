import { execFile } from 'node:child_process';
import { expect } from 'vitest';
import type { CliOutcome } from '../support/run-cli.js';

/**
 * Processes of a scratch application that installed the packed package (tests/package/): they
 * see neither the repository's source condition nor a DATABASE_URL, as on a user's machine.
 */
export function appEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env['NODE_OPTIONS'];
  delete env['DATABASE_URL'];
  return env;
}

/** Runs `file` with `args` in `cwd`; resolves with the exit code instead of throwing on non-zero. */
export function run(file: string, args: readonly string[], cwd: string): Promise<CliOutcome> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd, env: appEnv(), maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

/** {@link run}, expecting exit code 0 (the failure shows what it printed); its stdout. */
export async function ok(file: string, args: readonly string[], cwd: string): Promise<string> {
  const result = await run(file, args, cwd);
  expect(result.code, `${file} ${args.join(' ')}\n${result.stdout}\n${result.stderr}`).toBe(0);
  return result.stdout;
}
