import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU time from /proc (Linux): of one process, of a PostgreSQL server (its postmaster and every
 * process it started), and of the whole machine. The kernel counts in clock ticks, 100 a second
 * on Linux for every architecture Node.js runs on (USER_HZ).
 */
const TICKS_PER_SECOND = 100;

interface ProcStat {
  readonly ppid: number;
  /** utime + stime, seconds. */
  readonly own: number;
  /** cutime + cstime: children that ended and were waited for, seconds. */
  readonly children: number;
}

function procStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may hold spaces: fields count from after it.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const at = (field: number) => Number(fields[field - 3]);
  return {
    ppid: at(4),
    own: (at(14) + at(15)) / TICKS_PER_SECOND,
    children: (at(16) + at(17)) / TICKS_PER_SECOND,
  };
}

/** User + system CPU seconds of one live process (0 once it is gone). */
export function processCpuSeconds(pid: number): number {
  return procStat(pid)?.own ?? 0;
}

/**
 * CPU seconds of a PostgreSQL server so far: the postmaster, every live process it started
 * (backends, checkpointer, WAL writer …), and the ended ones it has reaped (its cutime). A
 * difference of two readings is the server's CPU in between, backends that ended meanwhile
 * included.
 */
export function serverCpuSeconds(postmasterPid: number): number | undefined {
  const postmaster = procStat(postmasterPid);
  if (postmaster === undefined) return undefined;
  let total = postmaster.own + postmaster.children;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = procStat(Number(entry));
    if (stat?.ppid === postmasterPid) total += stat.own;
  }
  return total;
}

/** The machine's CPU seconds so far, all cores: busy (user, nice, system, irq, softirq) and idle (idle, iowait); steal in neither. */
export interface MachineCpu {
  readonly busySeconds: number;
  readonly idleSeconds: number;
}

export function machineCpu(): MachineCpu {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const [user, nice, system, idle, iowait, irq, softirq] = line.trim().split(/\s+/).slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  return {
    busySeconds: (user + nice + system + irq + softirq) / TICKS_PER_SECOND,
    idleSeconds: (idle + iowait) / TICKS_PER_SECOND,
  };
}
