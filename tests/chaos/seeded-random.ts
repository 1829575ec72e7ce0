import { mulberry32 } from '../../runtime/faults/mulberry32.js';

/**
 * A small seeded generator (mulberry32) so that a chaos run's decisions — which worker to
 * kill, which backend to terminate, when — replay from the printed seed.
 */
export interface SeededRandom {
  readonly seed: number;
  /** Uniform in [0, 1). */
  next(): number;
  /** Integer in [min, max]. */
  int(min: number, max: number): number;
  pick<T>(items: readonly T[]): T | undefined;
}

export function seededRandom(seed: number): SeededRandom {
  const next = mulberry32(seed);
  return {
    seed,
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    pick: (items) => (items.length === 0 ? undefined : items[Math.floor(next() * items.length)]),
  };
}
