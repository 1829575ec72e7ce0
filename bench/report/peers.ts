import type { BenchEnvironment } from '../environment.js';
import type { EndToEndRow } from '../results-model.js';
import { END_TO_END_DESCRIPTION, sideBySideTable } from './end-to-end.js';
import { machineRows } from './markdown.js';

export interface PeersResults {
  readonly environment: BenchEnvironment;
  readonly peer: string;
  /** Versions of the peer's packages, as installed in bench/peers. */
  readonly peerPackages: string;
  readonly totalSeconds: number;
  /** One-minute load averages when the run started and ended: other work on the machine skews every number. */
  readonly loadAverage: readonly [number, number];
  readonly sizes: string;
  readonly rows: readonly EndToEndRow[];
}

/** The side-by-side page of `npm run bench:peers`. */
export function renderPeersMarkdown(results: PeersResults, chartFile: string): string {
  const env = results.environment;
  return [
    `# ledgerflow and ${results.peer}, end to end — ${env.date.slice(0, 10)}`,
    '',
    `Produced by \`npm run bench:peers\` (\`bench/peers/main.ts\`) in ${results.totalSeconds.toFixed(0)} s, both engines on the same ` +
      `server in the same run, each in databases of its own. ${results.sizes}`,
    '',
    ...machineRows(env),
    `| ${results.peer} | ${results.peerPackages} |`,
    `| load average (1 min) at start / end | ${results.loadAverage.map((l) => l.toFixed(1)).join(' / ')} |`,
    '',
    END_TO_END_DESCRIPTION,
    '',
    'On ledgerflow a client starts a run with `client.start` and learns of its completion from the worker\'s `run-completed` ' +
      'event (same process, no query); the worker runs with concurrency c. On DBOS Transact a client calls ' +
      '`DBOS.startWorkflow(workflow)(i)` and awaits `handle.getResult()`; DBOS executes the workflow in the process that starts it. ' +
      'Three steps: a step computing; one application row inserted in a transaction that also records the step ' +
      '(ledgerflow `transactional`, DBOS a data source transaction); a call to the same in-process fake payment provider ' +
      'with an idempotency key (ledgerflow `external` with `idempotentByKey`, DBOS a step keyed by workflow id + step). ' +
      'Both runs are checked to have written exactly one application row per workflow.',
    '',
    sideBySideTable(results.rows, results.peer),
    '',
    `Start-up and shutdown commits (measured with no workflow, taken off the per-workflow figures): ` +
      ['ledgerflow', results.peer].map((engine) => `${engine} ${range(results.rows.filter((r) => r.engine === engine).map((r) => r.lifecycleCommits))}`).join(', ') +
      '.',
    '',
    `![workflows/s against clients](${chartFile})`,
    '',
  ].join('\n');
}

function range(values: readonly number[]): string {
  const low = Math.min(...values);
  const high = Math.max(...values);
  return low === high ? String(low) : `${low}–${high}`;
}
