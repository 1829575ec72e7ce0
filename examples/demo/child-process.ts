import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface ChildResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs a TypeScript script of this folder as a real child process (node + tsx loader) and
 * resolves when it exits, however it exits: a SIGKILL is an outcome here, not an error.
 */
export function runScript(
  script: string,
  env: Readonly<Record<string, string | undefined>>,
  timeoutMs: number,
): Promise<ChildResult> {
  const path = fileURLToPath(new URL(script, import.meta.url));
  // The demo runs from the repository's sources (package.json exports, condition ledgerflow-source).
  const child = spawn(process.execPath, ['--conditions=ledgerflow-source', '--import', 'tsx', path], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${script} did not finish within ${timeoutMs} ms.\n${stderr.slice(-2000)}`));
    }, timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** The JSON lines a child printed on stdout (other lines are ignored). */
export function jsonLines(output: string): unknown[] {
  return output.split('\n').flatMap((line) => {
    if (!line.startsWith('{')) return [];
    try {
      return [JSON.parse(line) as unknown];
    } catch {
      return [];
    }
  });
}
