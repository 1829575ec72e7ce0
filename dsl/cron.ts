import { Cron } from 'croner';

/**
 * A cron expression read the one way ledgerflow reads them everywhere — when a schedule is
 * declared (validation), when a worker registers it and when ticks are computed — with croner
 * (a maintained parser; DST-aware in named time zones):
 *
 * - 5 fields (`minute hour day month weekday`) or 6 (a leading `second`); nicknames such as
 *   `@daily` and `@hourly` work too;
 * - a day-of-month and a day-of-week both given match either (as in Vixie cron);
 * - in `timezone` (an IANA name such as `Europe/Berlin`, or `UTC`), across daylight-saving
 *   changes: a wall-clock time that does not exist on a spring-forward day (02:30 in Berlin)
 *   fires at the first minute after the gap, one that happens twice on a fall-back day fires
 *   once (the first time); patterns that step over hours (`0 * * * *`) fire every real hour.
 *
 * The returned object only computes times: it starts no timer.
 */
export function parseCron(cron: string, timezone: string): Cron {
  return new Cron(cron, { timezone, mode: '5-or-6-parts', paused: true });
}

/** Is `timezone` an IANA time zone name this runtime knows (`Europe/Berlin`, `UTC`)? */
export function isTimeZone(timezone: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: timezone });
    return true;
  } catch {
    return false;
  }
}
