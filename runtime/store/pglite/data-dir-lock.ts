import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { StoreLockedError } from '../../errors.js';

/**
 * PGlite is one process on one data directory; a second opener (a `ledgerflow start` next to a
 * running `ledgerflow worker`) would corrupt it. A lock file beside the directory (inside it,
 * PGlite would take the directory for an existing cluster) holds the owner's pid; a lock
 * whose process is gone (SIGKILLed worker) is taken over.
 */
export function lockDataDir(dataDir: string): () => void {
  const path = `${dataDir}.lock`;
  for (let attempt = 0; attempt < 3; attempt++) {
    let fd: number;
    try {
      fd = openSync(path, 'wx');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = Number(readFileSync(path, 'utf8').trim());
      if (Number.isInteger(owner) && owner > 0 && isAlive(owner)) {
        throw new StoreLockedError(
          `The PGlite database at ${dataDir} is in use by process ${owner}${owner === process.pid ? ' (this process)' : ''}. ` +
            'PGlite allows one process at a time: stop that process first, start runs from inside it ' +
            "(createClient on the worker process's own store), or use a PostgreSQL server (DATABASE_URL or " +
            '--database-url) to run workers and other commands side by side.',
        );
      }
      rmSync(path, { force: true });
      continue;
    }
    writeSync(fd, `${process.pid}\n`);
    closeSync(fd);
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      process.off('exit', release);
      rmSync(path, { force: true });
    };
    process.on('exit', release);
    return release;
  }
  throw new Error(`Could not take the lock ${path}: it keeps reappearing. Is another process starting on ${dataDir}?`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
