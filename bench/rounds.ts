import type { RatioRange } from './results-model.js';

/**
 * What the benches that measure in rounds share: the median of a set of measurements, and a
 * ratio taken within each round summarised as its median with the lowest and highest.
 */

/** The middle item by `value` (the lower middle of an even count: a value that was measured). */
export function medianBy<T>(items: readonly T[], value: (item: T) => number): T {
  if (items.length === 0) throw new Error('medianBy: no items (a round measured nothing).');
  return [...items].sort((a, b) => value(a) - value(b))[Math.floor((items.length - 1) / 2)]!;
}

/** Per-round ratios as their median (see {@link medianBy}) and range. */
export function ratioRange(ratios: readonly number[]): RatioRange {
  return { median: medianBy(ratios, (x) => x), min: Math.min(...ratios), max: Math.max(...ratios) };
}

/** `median (min–max)`, or the median alone when every round agreed to the digits shown. */
export function formatRatioRange(r: RatioRange): string {
  const [median, min, max] = [r.median, r.min, r.max].map((x) => x.toFixed(2));
  return min === max ? median! : `${median} (${min}–${max})`;
}

/** `items` starting at position `round` (modulo its length): the order of a round's measurements. */
export function rotated<T>(items: readonly T[], round: number): T[] {
  const at = items.length === 0 ? 0 : round % items.length;
  return [...items.slice(at), ...items.slice(0, at)];
}
