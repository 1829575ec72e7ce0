import { UsageError } from './command.js';

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * A duration option such as `30d`, `12h`, `90m`, `45s` or `500ms`, in milliseconds; `undefined`
 * when absent.
 *
 * @example
 * durationOption('completed-older-than', '30d'); // 2_592_000_000
 */
export function durationOption(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(value.trim());
  const ms = match === null ? Number.NaN : Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  if (!Number.isSafeInteger(ms)) {
    throw new UsageError(
      `--${name} must be a whole number with a unit: d, h, m, s or ms, like 30d, 12h or 90m (got "${value}").`,
    );
  }
  return ms;
}
