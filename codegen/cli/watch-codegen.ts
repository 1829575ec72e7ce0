import { watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import { glob } from 'tinyglobby';
import { SourceCache } from '../analysis/analysis-program.js';
import { DEFAULT_OUT_DIR, discoveryIgnore, toPosix } from '../discovery/discover-workflow-files.js';
import { normalizeOutDir } from '../run-codegen.js';
import type { CliOptions } from './parse-args.js';

/** A TypeScript module (what discovery looks for); names without an extension may be new directories. */
const WATCHED_NAME = /\.(c|m)?tsx?$|^[^.]+$/;
/** Editors save in bursts (write, rename, chmod): one run per burst. */
const SETTLE_MS = 40;

/**
 * `codegen --watch`: runs codegen, then again whenever a TypeScript file under the root changes,
 * appears or disappears — outside what discovery never searches (node_modules, the output
 * directory, …) — until SIGINT or SIGTERM; changes during a run are gathered into the next run.
 * Each directory is watched on its own (no recursive watch, which would walk node_modules), and
 * the set is refreshed after every run, so new directories are watched too. The parsed sources
 * are kept between runs (`SourceCache`), so a run parses only what changed.
 *
 * Returns 0 once stopped; the first run's 2 (options runCodegen refuses) ends the watch at once.
 */
export async function watchCodegen(
  options: CliOptions,
  runOnce: (cache: SourceCache) => Promise<number>,
): Promise<number> {
  // Listening from the start: a Ctrl-C during the first run ends the watch after it, with 0.
  const signals = ['SIGINT', 'SIGTERM'] as const;
  let stopRequested = false;
  let stop = (): void => {};
  const stopSignal = new Promise<void>((resolve) => {
    stop = () => {
      for (const signal of signals) process.off(signal, stop);
      stopRequested = true;
      resolve();
    };
    for (const signal of signals) process.on(signal, stop);
  });
  const cache = new SourceCache();
  const first = await runOnce(cache);
  if (first === 2 || stopRequested) {
    stop();
    return first === 2 ? 2 : 0;
  }
  const root = path.resolve(options.root ?? process.cwd());
  const outDir = normalizeOutDir(root, options.out ?? DEFAULT_OUT_DIR);
  // Discovery's globs name what is inside an ignored directory; a directory glob must name the directory too.
  const ignore = discoveryIgnore(root, outDir).flatMap((pattern) =>
    pattern.endsWith('/**') ? [pattern, pattern.slice(0, -3)] : [pattern],
  );
  const watchers = new Map<string, FSWatcher>();
  const changed = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;

  const onChange = (directory: string, name: string | null): void => {
    if (stopped || (name !== null && !WATCHED_NAME.test(name))) return;
    changed.add(toPosix(path.relative(root, name === null ? directory : path.join(directory, name))) || '.');
    clearTimeout(timer);
    timer = setTimeout(startRun, SETTLE_MS);
  };
  const watchDirectories = async (): Promise<void> => {
    const found = await glob(['**'], {
      cwd: root,
      ignore,
      onlyDirectories: true,
      followSymbolicLinks: false,
      absolute: true,
    });
    const directories = new Set([root, ...found.map((d) => path.resolve(d))]);
    for (const [directory, watcher] of watchers) {
      if (!directories.has(directory)) {
        watcher.close();
        watchers.delete(directory);
      }
    }
    for (const directory of directories) {
      if (stopped || watchers.has(directory)) continue;
      try {
        const watcher = watch(directory, (_event, name) => onChange(directory, name));
        // A watched directory that is deleted reports an error on some platforms: forget it.
        watcher.on('error', () => {
          watcher.close();
          watchers.delete(directory);
        });
        watchers.set(directory, watcher);
      } catch {
        // Removed between the listing and the watch: the next refresh no longer lists it.
      }
    }
  };
  const startRun = (): void => {
    if (running !== undefined || stopped) return;
    running = (async () => {
      while (changed.size > 0 && !stopped) {
        const names = [...changed].sort();
        changed.clear();
        process.stderr.write(`ledgerflow codegen: changed: ${names.join(', ')}; running again.\n`);
        // Watch new directories before the run reads them, so that a change made in one right
        // after the run reported (a file removed from a directory created just before) is seen.
        await watchDirectories();
        try {
          await runOnce(cache);
        } catch (error) {
          // A run that fails (a file unreadable mid-save, a bug) must not end the watch.
          process.stderr.write(
            `ledgerflow codegen: run failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
          );
        }
        await watchDirectories();
      }
    })().finally(() => {
      running = undefined;
    });
  };

  await watchDirectories();
  process.stderr.write(`ledgerflow codegen: watching ${root} for changes (Ctrl-C stops).\n`);
  await stopSignal;
  stopped = true;
  clearTimeout(timer);
  for (const watcher of watchers.values()) watcher.close();
  await running;
  return 0;
}
