import { readFileSync } from 'node:fs';

/**
 * The busy part of a V8 CPU profile (`bench/profile-drain.ts` with `LEDGERFLOW_PROFILE_OUT`), as
 * tables: self time by function and by where the code lives (a package, a runtime file, Node's
 * internals, the garbage collector), each a share of the time the main thread was not idle.
 * Samples are weighted by their time deltas (the profiler's interval stretches under load).
 *
 *   npx tsx bench/profile-summary.ts <file.cpuprofile> [rows per table, default 20]
 *
 * V8's profiler samples the main thread only: the process's other threads (the garbage
 * collector's helpers, the optimizing compiler) and the kernel's share of the I/O are in
 * `process.cpuUsage()` and not here.
 */
interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
}
interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const [file, rowsArg] = process.argv.slice(2);
if (file === undefined) throw new Error('usage: npx tsx bench/profile-summary.ts <file.cpuprofile> [rows]');
const rows = Number(rowsArg ?? 20);
const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));

const selfTime = new Map<number, number>();
for (const [i, id] of profile.samples.entries())
  selfTime.set(id, (selfTime.get(id) ?? 0) + (profile.timeDeltas[i + 1] ?? 0));

const byFunction = new Map<string, number>();
const byArea = new Map<string, number>();
let busy = 0;
let total = 0;
for (const [id, time] of selfTime) {
  const frame = nodes.get(id)!.callFrame;
  total += time;
  if (frame.functionName === '(idle)') continue;
  busy += time;
  const where = shortUrl(frame.url);
  add(byFunction, `${frame.functionName || '(anonymous)'}${where === '' ? '' : ` ${where}`}`, time);
  add(byArea, area(frame), time);
}

process.stdout.write(`main thread busy ${(busy / 1000).toFixed(0)} ms of ${(total / 1000).toFixed(0)} ms sampled\n\n`);
table('self time by function', byFunction);
table('self time by area', byArea);

function add(into: Map<string, number>, key: string, time: number): void {
  into.set(key, (into.get(key) ?? 0) + time);
}

function shortUrl(url: string): string {
  const local = /\/(runtime|bench|dsl)\/(.*)$/.exec(url);
  if (local !== null && !url.includes('/node_modules/')) return `${local[1]}/${local[2]}`;
  const packaged = /\/node_modules\/(.*)$/.exec(url);
  return packaged !== null ? packaged[1]! : url;
}

function area(frame: ProfileNode['callFrame']): string {
  const packaged = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(frame.url);
  if (packaged !== null) return `package ${packaged[1]}`;
  if (frame.url.startsWith('node:')) return 'Node internals (streams, timers, events, buffers)';
  if (frame.url === '') return frame.functionName; // (garbage collector), (program), native calls such as writev
  return shortUrl(frame.url);
}

function table(title: string, times: Map<string, number>): void {
  process.stdout.write(`| ${title} | % of busy |\n|---|---:|\n`);
  for (const [key, time] of [...times].sort((a, b) => b[1] - a[1]).slice(0, rows)) {
    process.stdout.write(`| ${key} | ${((100 * time) / busy).toFixed(1)} |\n`);
  }
  process.stdout.write('\n');
}
