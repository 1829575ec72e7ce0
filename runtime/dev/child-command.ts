import { spawn, type ChildProcess } from 'node:child_process';
import { ledgerflowBin } from './ledgerflow-bin.js';

/**
 * A `ledgerflow` command in a child process whose output is handed over line by line. A fresh
 * process per worker is what makes a reload real: Node caches every imported module for the life
 * of a process, so changed handlers are only loaded by a new one.
 */
export class ChildCommand {
  readonly #child: ChildProcess;
  readonly exited: Promise<number | null>;

  constructor(args: readonly string[], env: NodeJS.ProcessEnv, onLine: (stream: 'out' | 'err', line: string) => void) {
    // The IPC channel is only a lifeline: bin/ledgerflow.js stops the child when it disconnects.
    this.#child = spawn(process.execPath, [ledgerflowBin(), ...args], {
      env,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    for (const stream of ['out', 'err'] as const) {
      let pending = '';
      this.#child[stream === 'out' ? 'stdout' : 'stderr']!.on('data', (chunk: Buffer) => {
        pending += chunk.toString();
        const lines = pending.split('\n');
        pending = lines.pop()!;
        for (const line of lines) onLine(stream, line);
      });
    }
    this.exited = new Promise((resolve) => this.#child.on('exit', (code) => resolve(code)));
  }

  /** SIGTERM (a worker finishes or releases its in-flight steps), then waits for the exit. */
  async stop(): Promise<number | null> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) this.#child.kill('SIGTERM');
    return this.exited;
  }
}
