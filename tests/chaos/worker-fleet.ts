import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseFaultLogLine, type FaultAction, type FaultFiring } from '../../runtime/faults/fault-points.js';
import type { SeededRandom } from './seeded-random.js';

const WORKER_ENTRY = fileURLToPath(new URL('./fixtures/chaos-worker.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Prefix of every chaos worker's `application_name`, so the controller can find their backends. */
export const CHAOS_APPLICATION_PREFIX = 'ledgerflow-chaos-';

/** The line a chaos worker prints on stderr once its worker started (is claiming runs). */
export const CHAOS_READY_LINE = 'chaos-worker-ready';

export interface FleetCounters {
  spawned: number;
  /** SIGKILLs the controller sent at random moments. */
  killedByController: number;
  /** SIGKILLs the controller sent to a worker parked at a fault point (a `hang`). */
  killedByControllerAtFaultPoint: number;
  /** Workers that SIGKILLed themselves at a fault point. */
  killedAtFaultPoint: number;
  /** Exits the controller did not cause and no fault point explains: reported, with their stderr. */
  unexpectedExits: number;
  /** Fault points that fired in the workers, by action (from the line each prints before acting). */
  faultsFired: Record<FaultAction, number>;
}

export interface FleetOptions {
  readonly size: number;
  readonly env: (spawnIndex: number) => Readonly<Record<string, string>>;
  readonly random: SeededRandom;
  readonly log: (line: string) => void;
  /** Hears every fault a worker reports; return `true` to SIGKILL that worker right there. */
  readonly killAtFault?: (firing: FaultFiring) => boolean;
  /** The worker script each child runs (default: fixtures/chaos-worker.ts). */
  readonly entry?: string;
  /** Hears every worker's exit, by its CHAOS_WORKER_NAME (the composition fuzzer closes its handler spans). */
  readonly onExit?: (name: string) => void;
  /** Hears every line a worker writes on stderr. */
  readonly onLine?: (line: string) => void;
}

interface Slot {
  readonly index: number;
  child: ChildProcess | undefined;
  spawnIndex: number;
  killedByUs: boolean;
  /** The worker printed {@link CHAOS_READY_LINE}: it is claiming runs. */
  ready: boolean;
  stderr: string;
  partialLine: string;
}

/**
 * A fixed number of worker child processes. A worker that dies, for any reason, is replaced
 * while the fleet is running; every death is counted by its cause.
 */
export class WorkerFleet {
  readonly counters: FleetCounters = {
    spawned: 0,
    killedByController: 0,
    killedByControllerAtFaultPoint: 0,
    killedAtFaultPoint: 0,
    unexpectedExits: 0,
    faultsFired: { throw: 0, hang: 0, kill: 0 },
  };
  /** stderr tails of workers that exited unexpectedly. */
  readonly unexpected: string[] = [];
  readonly #slots: Slot[];
  readonly #options: FleetOptions;
  #running = false;
  #env: FleetOptions['env'];

  constructor(options: FleetOptions) {
    this.#options = options;
    this.#env = options.env;
    this.#slots = Array.from({ length: options.size }, (_, index) => ({
      index,
      child: undefined,
      spawnIndex: -1,
      killedByUs: false,
      ready: false,
      stderr: '',
      partialLine: '',
    }));
  }

  /** Starts (or restarts) every slot with `env` from now on. */
  start(env: FleetOptions['env'] = this.#env): void {
    this.#env = env;
    this.#running = true;
    for (const slot of this.#slots) if (slot.child === undefined) this.#spawn(slot);
  }

  /**
   * SIGKILLs one live worker that is claiming runs, chosen by the seeded generator; it is
   * replaced at once. `false` when none is (all of them still starting): a kill of a worker that
   * never started would test nothing, and on a loaded machine kills would outpace starts.
   */
  killRandom(): boolean {
    const live = this.#slots.filter(
      (s) => s.child !== undefined && s.child.exitCode === null && !s.killedByUs && s.ready,
    );
    const slot = this.#options.random.pick(live);
    if (slot === undefined) return false;
    this.#kill(slot);
    return true;
  }

  /** Workers that printed {@link CHAOS_READY_LINE} and still run. */
  get readyCount(): number {
    return this.#slots.filter((s) => s.child !== undefined && s.child.exitCode === null && s.ready).length;
  }

  /** SIGKILLs the live worker named `name` (its CHAOS_WORKER_NAME), if it still runs; it is replaced. */
  killNamed(name: string): boolean {
    const slot = this.#slots.find(
      (s) => s.child !== undefined && s.child.exitCode === null && !s.killedByUs && workerName(s) === name,
    );
    if (slot === undefined) return false;
    this.#kill(slot);
    return true;
  }

  /**
   * Freezes one ready worker (SIGSTOP) for `ms`, then lets it go on (SIGCONT): a worker that
   * stalls past its lease and comes back as a zombie. `false` when none is ready.
   */
  freezeRandom(ms: number): boolean {
    const live = this.#slots.filter(
      (s) => s.child !== undefined && s.child.exitCode === null && !s.killedByUs && s.ready,
    );
    const child = this.#options.random.pick(live)?.child;
    if (child === undefined) return false;
    child.kill('SIGSTOP');
    setTimeout(() => child.kill('SIGCONT'), ms);
    return true;
  }

  /**
   * SIGKILLs every worker and waits for them to be gone; the fleet stays stopped. The end of the
   * chaos, not part of it: these kills are not counted.
   */
  async killAll(): Promise<void> {
    this.#running = false;
    const exits = this.#slots.map((slot) => this.#whenExited(slot));
    for (const slot of this.#slots) {
      slot.killedByUs = true;
      slot.child?.kill('SIGKILL');
    }
    await Promise.all(exits);
  }

  /** SIGTERM (graceful shutdown); SIGKILL after `graceMs`. */
  async stop(graceMs = 10_000): Promise<void> {
    this.#running = false;
    const exits = this.#slots.map((slot) => this.#whenExited(slot));
    for (const slot of this.#slots) {
      slot.killedByUs = true;
      slot.child?.kill('SIGTERM');
    }
    const timer = setTimeout(() => {
      for (const slot of this.#slots) slot.child?.kill('SIGKILL');
    }, graceMs);
    await Promise.all(exits);
    clearTimeout(timer);
  }

  #whenExited(slot: Slot): Promise<void> {
    const child = slot.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => child.once('exit', () => resolve()));
  }

  #kill(slot: Slot): void {
    slot.killedByUs = true;
    this.counters.killedByController += 1;
    slot.child?.kill('SIGKILL');
  }

  #spawn(slot: Slot): void {
    const spawnIndex = this.counters.spawned++;
    const child = spawn(process.execPath, ['--import', 'tsx', this.#options.entry ?? WORKER_ENTRY], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...this.#env(spawnIndex), CHAOS_WORKER_NAME: `w${slot.index}-${spawnIndex}` },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    slot.child = child;
    slot.spawnIndex = spawnIndex;
    slot.killedByUs = false;
    slot.ready = false;
    slot.stderr = '';
    slot.partialLine = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      slot.stderr = (slot.stderr + text).slice(-4_000);
      const lines = (slot.partialLine + text).split('\n');
      slot.partialLine = lines.pop() ?? '';
      for (const line of lines) {
        this.#options.onLine?.(line);
        if (line === CHAOS_READY_LINE && slot.child === child) slot.ready = true;
        const firing = parseFaultLogLine(line);
        if (firing === undefined) continue;
        this.counters.faultsFired[firing.action] += 1;
        if (
          firing.action === 'hang' &&
          slot.child === child &&
          !slot.killedByUs &&
          this.#options.killAtFault?.(firing)
        ) {
          this.#kill(slot);
          this.counters.killedByController -= 1;
          this.counters.killedByControllerAtFaultPoint += 1;
        }
      }
    });
    child.once('exit', (code, signal) => {
      this.#options.onExit?.(`w${slot.index}-${spawnIndex}`);
      if (slot.child !== child) return;
      slot.child = undefined;
      if (slot.killedByUs) {
        // Counted when sent.
      } else if (signal === 'SIGKILL') {
        this.counters.killedAtFaultPoint += 1;
      } else {
        this.counters.unexpectedExits += 1;
        this.unexpected.push(
          `worker w${slot.index}-${spawnIndex} exited (code ${code}, signal ${signal}):\n${slot.stderr}`,
        );
        this.#options.log(
          `worker w${slot.index}-${spawnIndex} exited unexpectedly (code ${code}, signal ${signal}):\n${slot.stderr}`,
        );
      }
      if (this.#running) this.#spawn(slot);
    });
  }
}

function workerName(slot: Slot): string {
  return `w${slot.index}-${slot.spawnIndex}`;
}
