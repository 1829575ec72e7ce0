import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { isProcessAlive } from '../store/pglite/process-alive.js';

/** What `ledgerflow dev` leaves for the other commands: where its database is served, by whom. */
export interface DevServerRecord {
  /** The PostgreSQL URL of the bridge, e.g. `postgres://postgres@127.0.0.1:40123/postgres`. */
  readonly url: string;
  readonly pid: number;
  /** The served PGlite data directory, absolute. */
  readonly dataDir: string;
  readonly dashboardUrl: string;
}

/** `.ledgerflow/dev.json` for the default data directory `.ledgerflow/db`: beside the directory it serves. */
export function devServerFile(dataDir: string): string {
  return join(dirname(resolve(dataDir)), 'dev.json');
}

/**
 * Writes the record (a whole file or none: written aside, then renamed) and returns the function
 * that removes it, also called when the process exits.
 */
export function writeDevServerFile(record: DevServerRecord): () => void {
  const file = devServerFile(record.dataDir);
  writeFileSync(`${file}.${process.pid}.tmp`, `${JSON.stringify(record, null, 2)}\n`);
  renameSync(`${file}.${process.pid}.tmp`, file);
  let removed = false;
  const remove = (): void => {
    if (removed) return;
    removed = true;
    process.off('exit', remove);
    // Only our own record: a later dev server may have replaced a file we left behind.
    if (readDevServerFile(file)?.pid === process.pid) rmSync(file, { force: true });
  };
  process.on('exit', remove);
  return remove;
}

/**
 * The dev server serving `dataDir`, if one runs. A record whose process is gone (a SIGKILLed
 * `ledgerflow dev`) is removed and ignored; so is one whose pid was reused by another program
 * (the dev server holds the data directory's lock under the same pid).
 */
export function findDevServer(dataDir: string): DevServerRecord | undefined {
  const file = devServerFile(dataDir);
  const record = readDevServerFile(file);
  if (record === undefined || record.dataDir !== resolve(dataDir)) return undefined;
  if (isProcessAlive(record.pid) && lockOwner(record.dataDir) === record.pid) return record;
  rmSync(file, { force: true });
  return undefined;
}

function readDevServerFile(file: string): DevServerRecord | undefined {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<DevServerRecord>;
    if (typeof parsed.url === 'string' && typeof parsed.pid === 'number' && typeof parsed.dataDir === 'string')
      return parsed as DevServerRecord;
  } catch {
    // Missing, or not ours to read: no dev server.
  }
  return undefined;
}

function lockOwner(dataDir: string): number | undefined {
  try {
    return Number(readFileSync(`${dataDir}.lock`, 'utf8').trim());
  } catch {
    return undefined;
  }
}
