import type { EndToEndRow } from '../results-model.js';
import { medianBy, ratioRange } from '../rounds.js';

/**
 * One cell of `npm run bench:peers` (a workload at a client count) from its rounds. In each
 * round every engine was measured once, back to back, their order rotated from round to round
 * (bench/peers/main.ts); a peer's numbers move 20–40 % between runs minutes apart, so a ratio is
 * taken within a round, where a slow minute of the machine falls on neighbours, and the cell
 * reports its median with the lowest and highest.
 *
 * Returns one row per engine, in the order of the first round: each engine's median round by
 * workflows/s (rollbacks summed over rounds), ledgerflow's carrying `ratioTo` every peer.
 */
export function summarisePeerCell(rounds: readonly (readonly EndToEndRow[])[]): EndToEndRow[] {
  const first = rounds[0];
  if (!first) throw new Error('summarisePeerCell: no rounds.');
  const engines = first.map((r) => r.engine);
  const rowOf = (round: readonly EndToEndRow[], engine: string): EndToEndRow | undefined =>
    round.find((r) => r.engine === engine);
  return engines.map((engine) => {
    const rows = rounds.map((round) => rowOf(round, engine)).filter((r) => r !== undefined);
    const median = medianBy(rows, (r) => r.workflowsPerSecond);
    const summary: EndToEndRow = {
      ...median,
      rounds: rows.length,
      rollbacks: rows.reduce((sum, r) => sum + r.rollbacks, 0),
    };
    if (engine !== 'ledgerflow') return summary;
    const ratioTo = Object.fromEntries(
      engines
        .filter((peer) => peer !== 'ledgerflow')
        .map((peer) => {
          const ratios = rounds.flatMap((round) => {
            const [ours, theirs] = [rowOf(round, 'ledgerflow'), rowOf(round, peer)];
            return ours && theirs ? [ours.workflowsPerSecond / theirs.workflowsPerSecond] : [];
          });
          return [peer, ratioRange(ratios)] as const;
        }),
    );
    return { ...summary, ratioTo };
  });
}
