import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { describeEnvironment, openBenchServer } from './environment.js';
import { renderChartPng, renderChartSvg, type ChartSeries } from './report/chart.js';
import { renderMarkdown } from './report/markdown.js';
import type { BenchResults, ThroughputRow } from './results-model.js';
import { installSchema } from './schema.js';
import { FLOOR_SHAPE, measureFloor } from './workloads/w0-floor.js';

/**
 * `npm run bench`: every workload in one run against one durable server, then a Markdown
 * table and a chart in bench/results/. Never part of `npm test`.
 *
 * LEDGERFLOW_BENCH_N   steps per throughput measurement (default 2000)
 * DATABASE_URL         use this server instead of starting one (its settings are recorded as found)
 */
const CONCURRENCIES = [1, 4, 16] as const;

async function main(): Promise<void> {
  const n = positiveInt('LEDGERFLOW_BENCH_N', 2000);
  const started = performance.now();
  const server = await openBenchServer();
  const notes: string[] = [];
  try {
    const environment = await describeEnvironment(server);
    log(`server: ${environment.serverVersion}, fsync=${environment.fsync}, synchronous_commit=${environment.synchronousCommit}`);

    const floor: ThroughputRow[] = [];
    for (const concurrency of CONCURRENCIES) {
      const url = await server.freshDatabase(`bench_w0_c${concurrency}`);
      await installSchema(url, [FLOOR_SHAPE]);
      const result = await measureFloor(url, concurrency, n);
      floor.push({ workload: 'W0 floor', concurrency, steps: result.commits, seconds: result.seconds, stepsPerSecond: result.commitsPerSecond, commitsPerStep: 1 });
      log(`W0 c=${concurrency}: ${result.commitsPerSecond.toFixed(0)} commits/s`);
    }

    const results: BenchResults = {
      environment,
      concurrencies: CONCURRENCIES,
      stepsPerMeasurement: `Each throughput measurement completes ${n} steps (LEDGERFLOW_BENCH_N).`,
      totalSeconds: (performance.now() - started) / 1000,
      floor,
      durable: [],
      stepCosts: [],
      pglite: [],
      notes,
    };
    writeResults(results);
  } finally {
    await server.close();
  }
}

function writeResults(results: BenchResults): void {
  const dir = join(dirname(fileURLToPath(import.meta.url)), 'results');
  mkdirSync(dir, { recursive: true });
  const day = results.environment.date.slice(0, 10);
  const series: ChartSeries[] = [
    { label: 'W0 floor (commits/s)', floor: true, points: results.floor.map((r) => ({ concurrency: r.concurrency, value: r.stepsPerSecond })) },
    ...groupBy(results.durable, (r) => r.workload).map(([label, rows]) => ({
      label,
      points: rows.map((r) => ({ concurrency: r.concurrency, value: r.stepsPerSecond })),
    })),
  ];
  const svg = renderChartSvg({
    title: 'ledgerflow steps/s against concurrency',
    subtitle: `${results.environment.serverVersion}, fsync ${results.environment.fsync}, synchronous_commit ${results.environment.synchronousCommit}, ${results.environment.cpuCount} CPUs — ${day}`,
    yLabel: 'steps per second',
    series,
  });
  const png = renderChartPng(svg);
  for (const base of [day, 'latest']) {
    writeFileSync(join(dir, `${base}.svg`), svg);
    writeFileSync(join(dir, `${base}.png`), png);
    writeFileSync(join(dir, `${base}.md`), renderMarkdown(results, `${base}.png`));
  }
  log(`wrote bench/results/${day}.md, .svg, .png (and latest.*)`);
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Array<[string, T[]]> {
  const groups = new Map<string, T[]>();
  for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
  return [...groups];
}

function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`${name} must be a positive integer (got "${raw}").`);
  }
  return value;
}

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

await main();
