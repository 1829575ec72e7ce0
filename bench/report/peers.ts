import type { BenchEnvironment } from '../environment.js';
import type { PeerDescription } from '../peers/peers.js';
import type { EndToEndRow } from '../results-model.js';
import { END_TO_END_DESCRIPTION, peersCostTable, peersTable } from './end-to-end.js';
import { machineRows } from './markdown.js';

export interface PeersResults {
  readonly environment: BenchEnvironment;
  /** The peers measured, with the versions of their packages as installed in bench/peers/<peer>. */
  readonly peers: readonly (PeerDescription & { readonly versions: string })[];
  readonly totalSeconds: number;
  /** One-minute load averages when the run started and ended: other work on the machine skews every number. */
  readonly loadAverage: readonly [number, number];
  readonly sizes: string;
  readonly rows: readonly EndToEndRow[];
}

/** The side-by-side page of `npm run bench:peers`. */
export function renderPeersMarkdown(results: PeersResults, chartFile: string): string {
  const env = results.environment;
  const names = results.peers.map((p) => p.name);
  const engines = ['ledgerflow', ...names];
  return [
    `# ledgerflow, ${names.join(', ')}: end to end, closed loop — ${env.date.slice(0, 10)}`,
    '',
    `Produced by \`npm run bench:peers\` (\`bench/peers/main.ts\`) in ${results.totalSeconds.toFixed(0)} s, every engine on the same ` +
      `machine in the same run, those on PostgreSQL on the same server, each in databases of its own. ${results.sizes}`,
    '',
    ...machineRows(env),
    ...results.peers.map((p) => `| ${p.name} | ${p.versions} |`),
    `| load average (1 min) at start / end | ${results.loadAverage.map((l) => l.toFixed(1)).join(' / ')} |`,
    '',
    END_TO_END_DESCRIPTION,
    '',
    'Every engine runs its workflows in the process whose clients start them and wait for them. Three steps: a step ' +
      'computing; one application row written exactly once; a call to the same in-process fake payment provider with an ' +
      'idempotency key. After each measurement the bench checks that the engine wrote exactly one application row per ' +
      'workflow (none for one step) and charged the provider once per workflow under its own key, calling no key twice, ' +
      'and fails if not (`bench/exactly-once.ts`).',
    '',
    '## Workflows per second, and ledgerflow / peer',
    '',
    peersTable(results.rows, names),
    '',
    '## PostgreSQL commits / WAL syncs per workflow',
    '',
    peersCostTable(results.rows, engines),
    '',
    `Start-up and shutdown commits (measured with no workflow, taken off the per-workflow figures): ` +
      engines
        .filter((engine) => results.rows.some((r) => r.engine === engine && Number.isFinite(r.lifecycleCommits)))
        .map(
          (engine) =>
            `${engine} ${range(results.rows.filter((r) => r.engine === engine).map((r) => r.lifecycleCommits))}`,
        )
        .join(', ') +
      '.',
    '',
    '## How each engine is driven, and the application write',
    '',
    '**ledgerflow**: in a child process of its own, fresh for each measurement as each peer is (bench/peers/ledgerflow-child.ts), ' +
      '`createClient({ store, worker })` in the process that runs the worker (concurrency c); a client calls ' +
      "`client.startAndWait`. The row is written by a `transactional` step in the transaction that commits the step's result: " +
      'the write and the checkpoint are one commit.',
    '',
    ...results.peers.flatMap((p) => [`**${p.name}** (state: ${p.store}): ${p.driven} ${p.write}`, '']),
    `![workflows/s against clients](${chartFile})`,
    '',
  ].join('\n');
}

function range(values: readonly number[]): string {
  const low = Math.min(...values);
  const high = Math.max(...values);
  return low === high ? String(low) : `${low}–${high}`;
}
