/**
 * `npm run soak`: the chaos run at soak size (SOAK_CHAOS in tests/chaos/chaos-profiles.ts:
 * 10 000 runs, five workers SIGKILLed a thousand times, backends terminated, the server crashed
 * ten times), checked by the same invariants as the CI chaos run. Writes its summary line, with
 * the machine, the seed and the duration, to bench/results/soak-<date>.md and soak-latest.md;
 * exits 1 when an invariant was violated or the run did less chaos than its profile's minimums.
 *
 * LEDGERFLOW_CHAOS_SEED replays a soak's decisions; LEDGERFLOW_SOAK_RUNS makes a shorter one
 * (its results file says so).
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus, loadavg, platform, release, totalmem } from 'node:os';
import { randomInt } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { SOAK_CHAOS, SOAK_CHAOS_MINIMUMS } from '../../tests/chaos/chaos-profiles.js';
import { runChaos, type ChaosOutcome } from '../../tests/chaos/chaos-run.js';
import { findPostgresBin } from '../../tests/support/postgres-server.js';

const RESULTS_DIR = fileURLToPath(new URL('../results/', import.meta.url));
// The worker processes the chaos fleet starts (`node --import tsx …`, inheriting this env) must
// resolve `ledgerflow/*` to the source as this process does (as vitest.config.ts does for tests).
const SOURCE_CONDITION = '--conditions=ledgerflow-source';
if (!(process.env['NODE_OPTIONS'] ?? '').includes(SOURCE_CONDITION)) {
  process.env['NODE_OPTIONS'] = [process.env['NODE_OPTIONS'], SOURCE_CONDITION].filter(Boolean).join(' ');
}

const seed = Number(process.env['LEDGERFLOW_CHAOS_SEED'] ?? randomInt(1, 1_000_000));
const runsOverride = process.env['LEDGERFLOW_SOAK_RUNS'];
const profile = runsOverride === undefined ? SOAK_CHAOS : scaledProfile(Number(runsOverride));
const started = new Date();
const loadBefore = loadavg();
process.stderr.write(`soak: ${profile.runs} runs, seed ${seed}, started ${started.toISOString()}\n`);
const outcome = await runChaos({ ...profile, seed, log: (line) => process.stderr.write(`[soak] ${line}\n`) });
const loadAfter = loadavg();
const problems = soakProblems(outcome);
const markdown = renderSoak(outcome, problems, started, loadBefore, loadAfter);
const day = started.toISOString().slice(0, 10);
for (const file of [`soak-${day}.md`, 'soak-latest.md']) writeFileSync(join(RESULTS_DIR, file), markdown);
process.stdout.write(`${outcome.summary}\n`);
if (problems.length > 0) {
  process.stderr.write(`soak FAILED:\n${problems.map((p) => `  - ${p}`).join('\n')}\n`);
  process.exitCode = 1;
}

/** What a soak must show: no violation, everything finished, at least the chaos it promised. */
function soakProblems(o: ChaosOutcome): string[] {
  const minimums = runsOverride === undefined ? SOAK_CHAOS_MINIMUMS : undefined;
  return [
    ...o.report.violations,
    ...o.fulfil.violations,
    ...(o.report.duplicates + o.fulfil.duplicates > 0
      ? [`${o.report.duplicates + o.fulfil.duplicates} duplicates`]
      : []),
    ...(o.report.completed !== o.options.runs ? [`${o.report.completed} of ${o.options.runs} runs completed`] : []),
    ...(o.fulfil.completed !== o.fulfil.runs
      ? [`${o.fulfil.completed} of ${o.fulfil.runs} fulfilment runs completed`]
      : []),
    ...o.unexpectedExits.map((exit) => `unexpected worker exit: ${exit.split('\n')[0]}`),
    ...(minimums !== undefined && o.kills.total < minimums.kills
      ? [`only ${o.kills.total} kills (at least ${minimums.kills})`]
      : []),
    ...(minimums !== undefined && o.backendTerminations < minimums.backendTerminations
      ? [`only ${o.backendTerminations} backend terminations (at least ${minimums.backendTerminations})`]
      : []),
    ...(minimums !== undefined && o.serverRestarts < minimums.serverRestarts
      ? [`only ${o.serverRestarts} server restarts (at least ${minimums.serverRestarts})`]
      : []),
  ];
}

/** A shorter soak keeps the soak's pace: chaos time, kills and terminations in proportion to its runs. */
function scaledProfile(runs: number): typeof SOAK_CHAOS {
  if (!(Number.isInteger(runs) && runs >= 100))
    throw new RangeError(`LEDGERFLOW_SOAK_RUNS must be an integer >= 100 (got ${runs}).`);
  const share = runs / SOAK_CHAOS.runs;
  return {
    ...SOAK_CHAOS,
    runs,
    chaosMs: Math.round(SOAK_CHAOS.chaosMs * share),
    kills: Math.ceil(SOAK_CHAOS.kills * share),
    backendTerminations: Math.ceil(SOAK_CHAOS.backendTerminations * share),
    serverRestarts: Math.max(1, Math.round(SOAK_CHAOS.serverRestarts * share)),
  };
}

function renderSoak(
  o: ChaosOutcome,
  problems: readonly string[],
  start: Date,
  before: number[],
  after: number[],
): string {
  const cpu = cpus();
  const load = (l: number[]) => l.map((v) => v.toFixed(2)).join(' ');
  const postgres = execFileSync(join(findPostgresBin(), 'postgres'), ['--version']).toString().trim();
  const p = o.options;
  return [
    `# Soak: ${p.runs.toLocaleString('en-US')} chaos runs`,
    '',
    `\`npm run soak\` (bench/soak/main.ts; the profile is SOAK_CHAOS in tests/chaos/chaos-profiles.ts)` +
      (runsOverride !== undefined ? `, shortened with LEDGERFLOW_SOAK_RUNS=${runsOverride}` : '') +
      '. Replay with `LEDGERFLOW_CHAOS_SEED=' +
      `${o.options.seed}\`.`,
    '',
    '| | |',
    '|---|---|',
    `| result | ${problems.length === 0 ? 'passed: no violation, every run completed' : `FAILED: ${problems.length} problem(s), listed below`} |`,
    `| date | ${start.toISOString()} |`,
    `| duration | ${o.seconds.toFixed(0)} s (${(p.chaosMs / 1000).toFixed(0)} s of chaos, then the settle and the checks) |`,
    `| seed | ${p.seed} |`,
    `| profile | ${p.runs} runs (+${Math.floor(p.runs / 4)} fulfilment runs), ${p.workers} workers × ${p.concurrency}, targets: ${p.kills} random kills, ${p.backendTerminations} backend terminations, ${p.serverRestarts} server crashes |`,
    `| machine | ${cpu[0]?.model.trim() ?? 'unknown'}, ${cpu.length} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, ${platform()} ${release()} |`,
    `| software | Node ${process.version}, ${postgres} |`,
    `| load average (1/5/15 min) | before ${load(before)}, after ${load(after)} (other work on the machine shares its cores) |`,
    '',
    'Summary line:',
    '',
    '```text',
    o.summary,
    '```',
    ...(problems.length > 0 ? ['', 'Problems:', '', ...problems.map((x) => `- ${x}`)] : []),
    '',
  ].join('\n');
}
