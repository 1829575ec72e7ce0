import { formatRatioRange } from '../rounds.js';
import type { EndToEndRow } from '../results-model.js';

export const END_TO_END_DESCRIPTION =
  "Each of c clients starts a run and waits for its result before starting the next (a closed loop: ledgerflow's " +
  'clients call `client.startAndWait`, in the process that runs the worker), while one ' +
  'worker process executes them; timed from the first start to the last result, so starting and waiting are paid inside the ' +
  "measurement. Commits per workflow are the `pg_stat_database.xact_commit` delta of the engine's databases from opening " +
  'the pools to closing them, less that of a start-up and shutdown with no run in between (given as start-up commits), ' +
  'divided by the workflows run (warm-up included); background polling while the runs execute stays in. Read-only ' +
  'transactions count as commits too; WAL syncs per workflow (`pg_stat_wal.wal_sync`, the same way) count only what ' +
  'cost an fsync — several commits arriving together share one.';

/** One engine's end-to-end rows. */
export function endToEndTable(rows: readonly EndToEndRow[]): string {
  return [
    '| workload | clients | workflows | seconds | workflows/s | steps/s | commits / workflow | WAL syncs / workflow | start-up commits | rollbacks |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.workload} | ${r.clients} | ${r.workflows} | ${r.seconds.toFixed(2)} | ${r.workflowsPerSecond.toFixed(0)} | ` +
        `${r.stepsPerSecond.toFixed(0)} | ${r.commitsPerWorkflow.toFixed(2)} | ${r.walSyncsPerWorkflow.toFixed(2)} | ${r.lifecycleCommits} | ${r.rollbacks} |`,
    ),
  ].join('\n');
}

/**
 * ledgerflow next to each peer, matched by workload and clients: workflows/s and the ratio
 * ledgerflow / peer (above 1: ledgerflow is faster), from the same run — measured in rounds, the
 * median of the per-round ratios with their range.
 */
export function peersTable(rows: readonly EndToEndRow[], peers: readonly string[]): string {
  const ours = rows.filter((r) => r.engine === 'ledgerflow');
  return [
    `| workload | clients | ledgerflow workflows/s | ${peers.map((p) => `${p} workflows/s | ledgerflow / ${p}`).join(' | ')} |`,
    `|---|---:|---:|${peers.map(() => '---:|---:|').join('')}`,
    ...ours.map((r) => {
      const cells = peers.map((peer) => {
        const theirs = rows.find((p) => p.engine === peer && p.workload === r.workload && p.clients === r.clients);
        if (!theirs) return '— | —';
        const ratio = r.ratioTo?.[peer];
        return `${theirs.workflowsPerSecond.toFixed(0)} | ${ratio ? formatRatioRange(ratio) : (r.workflowsPerSecond / theirs.workflowsPerSecond).toFixed(2)}`;
      });
      return `| ${r.workload} | ${r.clients} | ${r.workflowsPerSecond.toFixed(0)} | ${cells.join(' | ')} |`;
    }),
  ].join('\n');
}

/**
 * What each workflow cost each engine in PostgreSQL: commits and WAL syncs per workflow. An
 * engine that keeps its state elsewhere has NaN there and shows a dash.
 */
export function peersCostTable(rows: readonly EndToEndRow[], engines: readonly string[]): string {
  const counts = (r: EndToEndRow | undefined): string =>
    r && Number.isFinite(r.commitsPerWorkflow)
      ? `${r.commitsPerWorkflow.toFixed(2)} / ${r.walSyncsPerWorkflow.toFixed(2)}`
      : '—';
  const cells = rows.filter((r) => r.engine === engines[0]);
  return [
    `| workload | clients | ${engines.map((e) => `${e} commits / WAL syncs`).join(' | ')} |`,
    `|---|---:|${engines.map(() => '---:|').join('')}`,
    ...cells.map(
      (r) =>
        `| ${r.workload} | ${r.clients} | ${engines.map((e) => counts(rows.find((p) => p.engine === e && p.workload === r.workload && p.clients === r.clients))).join(' | ')} |`,
    ),
  ].join('\n');
}
