/**
 * Named fault points: places in the runtime where a test harness can make the process throw,
 * hang past its lease, or die with SIGKILL, to prove that every crash window is covered.
 *
 * Inert by default: `faultPoint(name)` is one boolean check until faults are configured, either
 * programmatically with {@link configureFaults} or, for worker child processes, through the
 * `LEDGERFLOW_FAULTS` environment variable (JSON {@link FaultSpec}), read once at import.
 *
 * Decisions come from a seeded PRNG (mulberry32): with the same seed and the same sequence of
 * points reached, a process makes the same choices, so a failing run replays from its seed. The
 * seed is in every injected error's message and in the line printed to stderr before a kill.
 *
 * @example
 * configureFaults({ seed: 42, points: { 'after-perform': { probability: 1, actions: ['kill'], times: 1 } } });
 * // or: LEDGERFLOW_FAULTS='{"seed":42,"points":{"after-perform":{"probability":1,"actions":["kill"]}}}'
 */

import { mulberry32 } from './mulberry32.js';

export const FAULT_POINTS = [
  'after-claim',
  'before-lease-renewal',
  'before-step-commit',
  'inside-transactional-handler',
  'opening-step-transaction',
  'after-intent-commit',
  'after-perform',
  'before-result-commit',
  'before-wait-commit',
  'after-child-batch',
  'after-queue-slot',
  'before-start-insert',
] as const;

export type FaultPointName = (typeof FAULT_POINTS)[number];

export type FaultAction = 'throw' | 'hang' | 'kill';

export interface FaultPointSpec {
  /** Chance in [0, 1] that reaching the point fires it. */
  readonly probability: number;
  /** One is picked at random (seeded) each time the point fires. */
  readonly actions: readonly FaultAction[];
  /** How long `hang` blocks; choose more than the worker's lease. Default 60 s. */
  readonly hangMs?: number;
  /** Fire at most this many times in this process. Default: unlimited. */
  readonly times?: number;
}

export interface FaultSpec {
  readonly seed: number;
  readonly points: Readonly<Partial<Record<FaultPointName, FaultPointSpec>>>;
}

/** What a listener registered with {@link onFaultFired} hears, and what is printed before a kill. */
export interface FaultFiring {
  readonly point: FaultPointName;
  readonly action: FaultAction;
  readonly seed: number;
  /** 1 for the first firing in this process. */
  readonly firing: number;
}

/** The error a `throw` action raises. */
export class InjectedFaultError extends Error {
  override readonly name = 'InjectedFaultError';
}

export const FAULTS_ENV = 'LEDGERFLOW_FAULTS';
const DEFAULT_HANG_MS = 60_000;
/** Prefix of the stderr line a process prints when a fault fires, for harnesses reading child output. */
export const FAULT_LOG_PREFIX = '[ledgerflow-fault] ';

interface FaultState {
  readonly spec: FaultSpec;
  readonly random: () => number;
  readonly firedPerPoint: Map<FaultPointName, number>;
  firings: number;
}

let enabled = false;
let state: FaultState | undefined;
const listeners = new Set<(firing: FaultFiring) => void>();

/**
 * Marks a crash window. Returns `undefined` (no await cost beyond a resolved value) unless faults
 * are enabled and this point fires; `hang` returns a promise that settles after `hangMs`.
 *
 * @example
 * await faultPoint('after-perform');
 */
export function faultPoint(name: FaultPointName): Promise<void> | undefined {
  if (!enabled) return undefined;
  return fire(name);
}

/** Enables fault injection (or disables it with `undefined`). Validates the spec first. */
export function configureFaults(spec: FaultSpec | undefined): void {
  if (spec === undefined) {
    enabled = false;
    state = undefined;
    return;
  }
  validateSpec(spec);
  state = { spec, random: mulberry32(spec.seed), firedPerPoint: new Map(), firings: 0 };
  enabled = Object.keys(spec.points).length > 0;
}

/** Subscribes to firings (before the action runs); returns an unsubscribe function. */
export function onFaultFired(listener: (firing: FaultFiring) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** Firings so far per point in this process. */
export function faultCounts(): Readonly<Partial<Record<FaultPointName, number>>> {
  return Object.fromEntries(state?.firedPerPoint ?? []);
}

/** Reads {@link FAULTS_ENV}; called once when this module loads. */
export function configureFaultsFromEnv(env: NodeJS.ProcessEnv = process.env): void {
  const raw = env[FAULTS_ENV];
  if (raw === undefined || raw === '') return;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (error) {
    throw new TypeError(`${FAULTS_ENV} is not valid JSON: ${(error as Error).message}`);
  }
  configureFaults(parsed as FaultSpec);
}

/** Parses the stderr line printed before an action; `undefined` for any other line. */
export function parseFaultLogLine(line: string): FaultFiring | undefined {
  if (!line.startsWith(FAULT_LOG_PREFIX)) return undefined;
  return JSON.parse(line.slice(FAULT_LOG_PREFIX.length)) as FaultFiring;
}

/** Decides synchronously; only a firing point costs a promise. */
function fire(name: FaultPointName): Promise<void> | undefined {
  const current = state;
  const point = current?.spec.points[name];
  if (current === undefined || point === undefined) return undefined;
  const fired = current.firedPerPoint.get(name) ?? 0;
  if (point.times !== undefined && fired >= point.times) return undefined;
  if (current.random() >= point.probability) return undefined;
  const action = point.actions[Math.floor(current.random() * point.actions.length)] ?? 'throw';
  current.firedPerPoint.set(name, fired + 1);
  current.firings += 1;
  const firing: FaultFiring = { point: name, action, seed: current.spec.seed, firing: current.firings };
  for (const listener of listeners) listener(firing);
  process.stderr.write(`${FAULT_LOG_PREFIX}${JSON.stringify(firing)}\n`);
  switch (action) {
    case 'throw':
      return Promise.reject(
        new InjectedFaultError(
          `Injected fault at ${name} (seed ${firing.seed}, firing #${firing.firing}); replay with ${FAULTS_ENV} and the same seed.`,
        ),
      );
    case 'hang':
      return new Promise((resolve) => setTimeout(resolve, point.hangMs ?? DEFAULT_HANG_MS));
    case 'kill':
      process.kill(process.pid, 'SIGKILL');
      // SIGKILL is delivered asynchronously; nothing after this point may run.
      return new Promise(() => {});
  }
}

function validateSpec(spec: FaultSpec): void {
  const problems: string[] = [];
  if (!Number.isInteger(spec.seed)) problems.push(`seed must be an integer (got ${String(spec.seed)})`);
  if (typeof spec.points !== 'object' || spec.points === null) problems.push('points must be an object');
  for (const [name, point] of Object.entries(spec.points ?? {})) {
    if (!(FAULT_POINTS as readonly string[]).includes(name)) {
      problems.push(`unknown fault point "${name}" (known: ${FAULT_POINTS.join(', ')})`);
      continue;
    }
    if (point === undefined) continue;
    if (!(point.probability >= 0 && point.probability <= 1)) problems.push(`${name}.probability must be in [0, 1]`);
    if (!Array.isArray(point.actions) || point.actions.length === 0)
      problems.push(`${name}.actions must be a non-empty array`);
    for (const action of point.actions ?? []) {
      if (action !== 'throw' && action !== 'hang' && action !== 'kill') {
        problems.push(`${name}.actions: unknown action "${String(action)}" (use throw, hang or kill)`);
      }
    }
    if (point.hangMs !== undefined && !(point.hangMs >= 0)) problems.push(`${name}.hangMs must be >= 0`);
    if (point.times !== undefined && !(Number.isInteger(point.times) && point.times >= 0)) {
      problems.push(`${name}.times must be an integer >= 0`);
    }
  }
  if (problems.length > 0) throw new TypeError(`Invalid fault spec: ${problems.join('; ')}.`);
}

configureFaultsFromEnv();
