import type { AnyWorkflow } from '../dsl/index.js';
import { prepareBenchDatabase } from './bench-database.js';
import type { BenchServer } from './environment.js';
import { medianBy, ratioRange, rotated } from './rounds.js';
import type { ThroughputRow } from './results-model.js';
import { type benchRegistrations, oneStep, threeStep } from './workloads/bench-workflows.js';
import { durableDrain } from './workloads/durable-drain.js';
import { type FloorForm, measureFloor } from './workloads/w0-floor.js';

export interface ThroughputRounds {
  readonly floor: ThroughputRow[];
  readonly floorAsTransaction: ThroughputRow[];
  readonly durable: ThroughputRow[];
}

export type Measurement = 'w0-statement' | 'w0-transaction' | 'w1' | 'w2';
const MEASUREMENTS: readonly Measurement[] = ['w0-statement', 'w0-transaction', 'w1', 'w2'];

const DRAINS: Record<'w1' | 'w2', { label: string; workflow: AnyWorkflow; stepsPerRun: number }> = {
  w1: { label: 'W1 one-step drain', workflow: oneStep, stepsPerRun: 1 },
  w2: { label: 'W2 three-step drain', workflow: threeStep, stepsPerRun: 3 },
};

/**
 * The full bench's throughput table, measured so that its ratios mean something on a shared
 * machine. A single cold drain per row, minutes from the W0 it is divided by, moved W2/W0 at
 * concurrency 1 between 0.44 and 0.74 across five runs of nearly the same code. Here:
 *
 * - one unreported warm-up drain of each workload first (the first drain in a process pays for
 *   loading and compiling the worker);
 * - then `rounds` rounds; in each, at each concurrency, the four measurements (W0 as one statement,
 *   W0 as a transaction, W1, W2) run back to back, their order rotated from round to round;
 * - a W1 or W2 ratio is taken against the one-statement W0 of the same round and concurrency, and
 *   the row reports the median of those ratios with their range; the row's other columns are those
 *   of its median round by steps/s, except rollbacks, summed over every round.
 */
export async function measureThroughputRounds(
  server: BenchServer,
  o: {
    readonly n: number;
    readonly rounds: number;
    readonly concurrencies: readonly number[];
    readonly registrations: ReturnType<typeof benchRegistrations>;
    readonly notes: string[];
    readonly log: (message: string) => void;
  },
): Promise<ThroughputRounds> {
  for (const drain of Object.values(DRAINS)) {
    const runs = Math.ceil(Math.min(o.n, 600) / drain.stepsPerRun);
    await durableDrain(server, { ...drain, runs, concurrency: 4, registrations: o.registrations, notes: o.notes });
  }
  const measured: RoundMeasurements[] = [];
  for (let round = 0; round < o.rounds; round++) {
    for (const concurrency of o.concurrencies) {
      const order = rotated(MEASUREMENTS, round);
      const rows: Partial<Record<Measurement, ThroughputRow>> = {};
      for (const m of order) {
        const row =
          m === 'w1' || m === 'w2'
            ? await drainRow(server, m, concurrency, o)
            : await floorRow(server, m, concurrency, o.n);
        rows[m] = row;
        o.log(`round ${round + 1} ${row.workload} c=${concurrency}: ${row.stepsPerSecond.toFixed(0)} steps/s`);
      }
      measured.push({ concurrency, rows: rows as Record<Measurement, ThroughputRow> });
      const floor = rows['w0-statement']!.stepsPerSecond;
      o.log(
        `round ${round + 1} c=${concurrency}: W1/W0 ${(rows.w1!.stepsPerSecond / floor).toFixed(2)}, ` +
          `W2/W0 ${(rows.w2!.stepsPerSecond / floor).toFixed(2)}`,
      );
    }
  }
  return summariseRounds(measured, o.concurrencies);
}

/** One round's four measurements at one concurrency. */
export interface RoundMeasurements {
  readonly concurrency: number;
  readonly rows: Readonly<Record<Measurement, ThroughputRow>>;
}

/**
 * The table's rows from the rounds: per measurement and concurrency, the median round by steps/s
 * (rollbacks summed over rounds); W1 and W2 rows carry the median, lowest and highest of their
 * per-round ratio to the same round's one-statement W0.
 */
export function summariseRounds(
  measured: readonly RoundMeasurements[],
  concurrencies: readonly number[],
): ThroughputRounds {
  const rowsOf = (m: Measurement): ThroughputRow[] =>
    concurrencies.map((concurrency) => {
      const rounds = measured.filter((r) => r.concurrency === concurrency);
      const rows = rounds.map((r) => r.rows[m]);
      const ratios =
        m === 'w1' || m === 'w2'
          ? rounds.map((r) => r.rows[m].stepsPerSecond / r.rows['w0-statement'].stepsPerSecond)
          : [];
      const rollbacks = rows.some((r) => r.rollbacks !== undefined)
        ? rows.reduce((sum, r) => sum + (r.rollbacks ?? 0), 0)
        : undefined;
      return {
        ...medianBy(rows, (r) => r.stepsPerSecond),
        rounds: rows.length,
        ...(rollbacks === undefined ? {} : { rollbacks }),
        ...(ratios.length > 0 ? { ratioToFloor: ratioRange(ratios) } : {}),
      };
    });
  return {
    floor: rowsOf('w0-statement'),
    floorAsTransaction: rowsOf('w0-transaction'),
    durable: [...rowsOf('w1'), ...rowsOf('w2')],
  };
}

async function drainRow(
  server: BenchServer,
  m: 'w1' | 'w2',
  concurrency: number,
  o: { readonly n: number; readonly registrations: ReturnType<typeof benchRegistrations>; readonly notes: string[] },
): Promise<ThroughputRow> {
  const drain = DRAINS[m];
  const runs = Math.ceil(o.n / drain.stepsPerRun);
  return (await durableDrain(server, { ...drain, runs, concurrency, registrations: o.registrations, notes: o.notes }))
    .row;
}

async function floorRow(server: BenchServer, m: Measurement, concurrency: number, n: number): Promise<ThroughputRow> {
  const form: FloorForm = m === 'w0-statement' ? 'statement' : 'transaction';
  const { url } = await prepareBenchDatabase(server, `bench_w0_${form}_c${concurrency}`);
  const result = await measureFloor(url, concurrency, n, form);
  return {
    workload: form === 'statement' ? 'W0 floor (one statement)' : 'W0 as BEGIN + 4 statements + COMMIT',
    concurrency,
    steps: result.commits,
    seconds: result.seconds,
    stepsPerSecond: result.commitsPerSecond,
    commitsPerStep: 1,
    roundTripsPerStep: form === 'statement' ? 1 : 6,
    workerCpuMsPerStep: result.cpuMs / result.commits,
  };
}
