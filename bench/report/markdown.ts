import type { BenchEnvironment } from '../environment.js';
import type { BenchResults, ThroughputRow } from '../results-model.js';
import { formatRatioRange } from '../rounds.js';
import { END_TO_END_DESCRIPTION, endToEndTable } from './end-to-end.js';
import { workerCpuTable } from '../workloads/worker-cpu.js';

/**
 * The head of a results page's machine table: where and on what it ran, and the server's
 * durability settings (a page adds its own rows after these).
 */
export function machineRows(env: BenchEnvironment): string[] {
  return [
    '| machine | |',
    '|---|---|',
    `| date | ${env.date} |`,
    `| CPU | ${env.cpuCount} × ${env.cpu} |`,
    `| memory | ${env.memoryGiB} GiB |`,
    `| OS | ${env.os} |`,
    `| Node.js | ${env.node} |`,
    `| server | ${env.serverVersion} (${env.serverOrigin}) |`,
    `| fsync / synchronous_commit / full_page_writes | ${env.fsync} / ${env.synchronousCommit} / ${env.fullPageWrites} |`,
  ];
}

/** The results page: machine and server first, then the tables, then the targets, met or not. */
export function renderMarkdown(results: BenchResults, chartFile: string): string {
  const env = results.environment;
  const lines: string[] = [
    `# ledgerflow benchmark — ${env.date.slice(0, 10)}`,
    '',
    `Produced by \`npm run bench\` (\`bench/main.ts\`) in ${results.totalSeconds.toFixed(0)} s. ` +
      `${results.stepsPerMeasurement}`,
    '',
    ...machineRows(env),
    `| wal_sync_method / shared_buffers | ${env.walSyncMethod} / ${env.sharedBuffers} |`,
    '',
    '## Throughput on durable PostgreSQL',
    '',
    'W0 is the floor: the writes of one fenced step commit (transition checked against the fencing token, attempt, ' +
      'recorded ledger row, result) as one transaction and nothing else — sent as one statement (one round trip), ' +
      'and for comparison as four statements between BEGIN and COMMIT. Ratios compare steps/s with the one-statement ' +
      'W0 commits/s at the same concurrency.' +
      roundsSentence(results.durable),
    '',
    throughputTable([...results.floor, ...results.floorAsTransaction, ...results.durable], results.floor),
    '',
    `![steps/s against concurrency](${chartFile})`,
    '',
  ];
  if (results.workerCpu && results.workerCpu.length > 0) {
    lines.push(
      '## Worker CPU per step (bench/workloads/worker-cpu.ts)',
      '',
      "The worker's process CPU (user + system, `process.cpuUsage()`) over a drain divided by its steps, on the runtime's " +
        "plain `pg` store after a warm-up drain: the column above includes the bench's query instrumentation, this one does not.",
      '',
      workerCpuTable(results.workerCpu),
      '',
    );
  }
  if (results.endToEnd && results.endToEnd.length > 0) {
    lines.push(
      '## End to end, starts included (bench/workloads/end-to-end.ts)',
      '',
      END_TO_END_DESCRIPTION,
      '',
      endToEndTable(results.endToEnd),
      '',
    );
  }
  if (results.stepCosts.length > 0) {
    lines.push(
      '## Cost of one step, by kind',
      '',
      'Single-step workflows of each kind drained at concurrency 1. A run is claimed either by its own claim commit or inside the commit that completed the previous run (a fused claim, while a backlog lasts), so claim commits per run can be 0. ' +
        'Driver-side counts class each transaction the worker sent; the server column is `pg_stat_database.xact_commit` per run.',
      '',
      '| kind | runs | step commits / step | claim commits / run | other commits / run | server commits / run | round trips / run |',
      '|---|---:|---:|---:|---:|---:|---:|',
      ...results.stepCosts.map(
        (r) =>
          `| ${r.kind} | ${r.runs} | ${r.stepCommitsPerStep.toFixed(2)} | ${r.claimCommitsPerRun.toFixed(2)} | ` +
          `${r.otherCommitsPerRun.toFixed(2)} | ${r.serverCommitsPerRun.toFixed(2)} | ${r.roundTripsPerRun.toFixed(2)} |`,
      ),
      '',
      'Where the time of one run goes (same runs, concurrency 1): waiting on each class of query, in ms per run; ' +
        'the rest of the wall time is the worker itself (handlers, validation, Kysely, the driver).',
      '',
      '| kind | wall ms / run | claim | begin | step statements | commit | other |',
      '|---|---:|---:|---:|---:|---:|---:|',
      ...results.stepCosts.map((r) => {
        const q = r.queryMsPerRun;
        return (
          `| ${r.kind} | ${r.wallMsPerRun.toFixed(2)} | ${q.claim.toFixed(2)} | ${q.begin.toFixed(2)} | ` +
          `${q['step statement'].toFixed(2)} | ${q.commit.toFixed(2)} | ${q.other.toFixed(2)} |`
        );
      }),
      '',
    );
  }
  if (results.latency) {
    const l = results.latency;
    lines.push(
      '## W3: start-to-first-step latency (open loop)',
      '',
      `Arrivals at a fixed ${l.arrivalsPerSecond.toFixed(0)} runs/s ${l.peakPerSecond === undefined ? '' : `(half of ${l.peakPerSecond.toFixed(0)} runs/s, the closed-loop peak of this path: 16 clients whose \`startAndWait\` inserts the run for a worker they do not embed) `}for ${l.seconds.toFixed(1)} s, ` +
        `worker concurrency ${l.concurrency}; latency from the scheduled arrival to the first step's commit.`,
      '',
      '| runs | p50 ms | p90 ms | p99 ms | max ms |',
      '|---:|---:|---:|---:|---:|',
      `| ${l.runs} | ${l.p50Ms.toFixed(1)} | ${l.p90Ms.toFixed(1)} | ${l.p99Ms.toFixed(1)} | ${l.maxMs.toFixed(1)} |`,
      '',
    );
    if (l.toResult) {
      const r = l.toResult;
      lines.push(
        'Start to result: the same runs, from the scheduled arrival to `client.startAndWait` returning the completed run ' +
          '(woken by the notification of its settling commit). Goal: p50 < 5 ms, p99 < 25 ms.',
        '',
        '| runs | p50 ms | p90 ms | p99 ms | max ms |',
        '|---:|---:|---:|---:|---:|',
        `| ${l.runs} | ${r.p50Ms.toFixed(1)} | ${r.p90Ms.toFixed(1)} | ${r.p99Ms.toFixed(1)} | ${r.maxMs.toFixed(1)} |`,
        '',
      );
    }
  }
  if (results.pglite.length > 0) {
    lines.push(
      '## PGlite (embedded, fsync off — not comparable with the durable numbers above)',
      '',
      throughputTable(results.pglite, []),
      '',
    );
  }
  if (results.waits) {
    const { sleeping: z, fanOut: f } = results.waits;
    lines.push(
      '## Waiting and fan-out (bench/workloads/waits.ts, durable PostgreSQL)',
      '',
      `Claim cost with ${z.sleeping} runs sleeping for a day (parked by a worker), against the same database before they slept; ` +
        '"just parked" still has the dead row versions the parking left at the front of the due index, "after VACUUM" is what autovacuum leaves:',
      '',
      '| measurement | without sleepers | just parked | after VACUUM | ratio just parked / without | ratio after VACUUM / without |',
      '|---|---:|---:|---:|---:|---:|',
      `| claim that finds nothing due (ms, mean of 500) | ${z.emptyClaimMs.without.toFixed(3)} | ${z.emptyClaimMs.with.toFixed(3)} | ${z.emptyClaimMs.vacuumed.toFixed(3)} | ${(z.emptyClaimMs.with / z.emptyClaimMs.without).toFixed(2)} | ${(z.emptyClaimMs.vacuumed / z.emptyClaimMs.without).toFixed(2)} |`,
      `| one-step runs drained (runs/s, concurrency 4) | ${z.drainRunsPerSecond.without.toFixed(0)} | ${z.drainRunsPerSecond.with.toFixed(0)} | ${z.drainRunsPerSecond.vacuumed.toFixed(0)} | ${(z.drainRunsPerSecond.with / z.drainRunsPerSecond.without).toFixed(2)} | ${(z.drainRunsPerSecond.vacuumed / z.drainRunsPerSecond.without).toFixed(2)} |`,
      '',
      `Starting ${f.children} children with one \`forEach\` step (one worker, concurrency 4, 500 children per commit):`,
      '',
      '| how | runs started per second | ratio to forEach |',
      '|---|---:|---:|',
      `| forEach (parent start → last child row) | ${f.forEachChildrenPerSecond.toFixed(0)} | 1.00 |`,
      `| client.start in a loop | ${f.clientStartsPerSecond.toFixed(0)} | ${(f.clientStartsPerSecond / f.forEachChildrenPerSecond).toFixed(2)} |`,
      `| one INSERT … SELECT generate_series (floor) | ${f.bulkInsertRowsPerSecond.toFixed(0)} | ${(f.bulkInsertRowsPerSecond / f.forEachChildrenPerSecond).toFixed(2)} |`,
      '',
    );
  }
  if (results.queues) {
    const { queued: q, w1, backlog: b } = results.queues;
    lines.push(
      '## Queues (bench/workloads/queues.ts, durable PostgreSQL)',
      '',
      '| measurement | value | baseline | ratio |',
      '|---|---:|---:|---:|',
      `| W1 through a queue whose limit is never reached, c=${q.concurrency} (steps/s) | ${q.stepsPerSecond.toFixed(0)} | ${w1.stepsPerSecond.toFixed(0)} (W1, no queue) | ${(q.stepsPerSecond / w1.stepsPerSecond).toFixed(2)} |`,
      `| claim that finds nothing due, ${b.queued} runs queued across ${b.partitions} partitions (ms) | ${b.emptyClaimMs.with.toFixed(3)} | ${b.emptyClaimMs.without.toFixed(3)} (same database, empty) | ${(b.emptyClaimMs.with / b.emptyClaimMs.without).toFixed(2)} |`,
      `| one grant from that backlog: next partition in turn, its oldest waiter (ms) | ${b.grantMs.toFixed(3)} | | |`,
      '',
    );
  }
  if (results.telemetry) {
    const t = results.telemetry;
    const plain = t.variants[0]!;
    lines.push(
      `## Telemetry overhead (bench/workloads/telemetry.ts, W1 c=${t.concurrency}, ${t.runs} runs, best of ${t.rounds} alternating rounds)`,
      '',
      '| variant | steps/s | ratio to plain | worker CPU ms/step | ratio to plain |',
      '|---|---:|---:|---:|---:|',
      ...t.variants.map(
        (v) =>
          `| ${v.variant} | ${v.stepsPerSecond.toFixed(0)} | ${(v.stepsPerSecond / plain.stepsPerSecond).toFixed(3)} | ${v.cpuMsPerStep.toFixed(3)} | ${(v.cpuMsPerStep / plain.cpuMsPerStep).toFixed(3)} |`,
      ),
      '',
      `The SDK variant exported ${t.spansPerRun.toFixed(2)} spans per run (a BatchSpanProcessor into an exporter that drops them; metrics read every second).`,
      '',
    );
  }
  if (results.codegen) {
    const c = results.codegen;
    lines.push(
      '## Codegen (bench/codegen-bench.ts)',
      '',
      '| workflow files | `ledgerflow codegen` ms | `tsc --noEmit` ms | ratio |',
      '|---:|---:|---:|---:|',
      `| ${c.files} | ${c.codegenMs} | ${c.tscMs} | ${c.ratio.toFixed(2)} |`,
      '',
      ...(c.watch
        ? [
            `\`codegen --watch\`: ${c.watch.msPerChange} ms per change (median of ${c.watch.edits} edits to ${c.watch.file}; ${c.watch.msPerChangeUncached} ms parsing everything again).`,
            '',
          ]
        : []),
    );
  }
  lines.push('## Targets', '', ...targetLines(results).map((t) => `- ${t}`), '');
  if (results.notes.length > 0) lines.push('## Notes', '', ...results.notes.map((n) => `- ${n}`), '');
  return lines.join('\n');
}

function throughputTable(rows: readonly ThroughputRow[], floor: readonly ThroughputRow[]): string {
  const header = [
    '| workload | concurrency | steps | seconds | steps/s | workflows/s | ratio to W0 | commits / step | round trips / step | worker CPU ms / step | rollbacks |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const body = rows.map((r) => {
    const base = floor.find((f) => f.concurrency === r.concurrency);
    const ratio = r.ratioToFloor
      ? formatRatioRange(r.ratioToFloor)
      : base && !r.workload.startsWith('W0')
        ? (r.stepsPerSecond / base.stepsPerSecond).toFixed(2)
        : '';
    return (
      `| ${r.workload} | ${r.concurrency} | ${r.steps} | ${r.seconds.toFixed(2)} | ${r.stepsPerSecond.toFixed(0)} | ` +
      `${opt(r.workflowsPerSecond, 0)} | ${ratio} | ${opt(r.commitsPerStep, 2)} | ${opt(r.roundTripsPerStep, 2)} | ` +
      `${opt(r.workerCpuMsPerStep, 2)} | ${r.rollbacks ?? ''} |`
    );
  });
  return [...header, ...body].join('\n');
}

function roundsSentence(rows: readonly ThroughputRow[]): string {
  const rounds = rows.find((r) => r.rounds !== undefined)?.rounds;
  if (rounds === undefined) return '';
  return (
    ` Measured in ${rounds} rounds after a warm-up drain of each workload: in each round, at each concurrency, ` +
    'the four measurements ran back to back (order rotated between rounds), and each W1/W2 ratio is taken against ' +
    'the W0 of its own round. A ratio is the median over rounds, with the lowest and highest in brackets; the other ' +
    "columns are the median round's (by steps/s), rollbacks summed over the rounds (bench/throughput-rounds.ts)."
  );
}

function opt(value: number | undefined, digits: number): string {
  return value === undefined ? '' : value.toFixed(digits);
}

function targetLines(results: BenchResults): string[] {
  const out: string[] = [];
  const top = Math.max(...results.concurrencies);
  const floorTop = results.floor.find((r) => r.concurrency === top);
  const w1Top = results.durable.find((r) => r.workload.startsWith('W1') && r.concurrency === top);
  if (floorTop && w1Top) {
    const ratio = w1Top.ratioToFloor?.median ?? w1Top.stepsPerSecond / floorTop.stepsPerSecond;
    out.push(`W1 ≥ 0.8 × W0 at concurrency ${top}: ${ratio.toFixed(2)} × — ${ratio >= 0.8 ? 'met' : 'NOT met'}`);
  } else {
    out.push(`W1 ≥ 0.8 × W0 at concurrency ${top}: not measured`);
  }
  const expected: Record<string, number> = { step: 1, transactional: 1, external: 2 };
  for (const cost of results.stepCosts) {
    const want = expected[cost.kind];
    if (want === undefined) continue;
    const got = cost.stepCommitsPerStep;
    out.push(
      `${want} commit${want === 1 ? '' : 's'} per \`${cost.kind}\` step: ${got.toFixed(2)} — ${Math.abs(got - want) < 0.005 ? 'met' : 'NOT met'}` +
        ` (plus ${cost.claimCommitsPerRun.toFixed(2)} separate claim commits per run; fused claims ride on the previous run's completion commit)`,
    );
  }
  const cpuTop = results.workerCpu?.find((r) => r.workload.startsWith('W1') && r.concurrency === top);
  out.push(
    cpuTop
      ? `worker CPU ≤ 0.1 ms per step (W1) at concurrency ${top}: ${cpuTop.cpuMsPerStep.toFixed(3)} ms — ${cpuTop.cpuMsPerStep <= 0.1 ? 'met' : 'NOT met'}`
      : `worker CPU ≤ 0.1 ms per step at concurrency ${top}: not measured`,
  );
  if (results.latency) {
    const { p50Ms: p50, p99Ms: p99 } = results.latency;
    out.push(
      `W3 start→first step p50 < 5 ms and p99 < 25 ms: ${p50.toFixed(1)} / ${p99.toFixed(1)} ms — ${p50 < 5 && p99 < 25 ? 'met' : 'NOT met'}`,
    );
  } else {
    out.push('W3 start→first step p50 < 5 ms and p99 < 25 ms: not measured');
  }
  return out;
}
