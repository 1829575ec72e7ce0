import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { StoreLockedError } from '../../errors.js';
import { isProcessAlive } from './process-alive.js';

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
      if (Number.isInteger(owner) && owner > 0 && isProcessAlive(owner)) {
        throw new StoreLockedError(
          `The PGlite database at ${dataDir} is in use by process ${owner}${owner === process.pid ? ' (this process)' : ''}. ` +
            'PGlite allows one process at a time. Run `ledgerflow dev --workflows <module>` instead of that process: ' +
            'it runs the worker and the dashboard and serves this database to every other ledgerflow command. ' +
            'Or stop that process first, or use a PostgreSQL server (DATABASE_URL or --database-url).',
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
