import { describe, expect, it } from 'vitest';
import { summarisePeerCell } from '../../bench/peers/rounds.js';
import { peersTable } from '../../bench/report/end-to-end.js';
import type { EndToEndRow } from '../../bench/results-model.js';
import { rotated } from '../../bench/rounds.js';

// bench:peers measures each cell in rounds, every engine once per round; ledgerflow's ratio to a
// peer is taken within a round, so a slow minute of the machine moves both sides of it.
function row(engine: string, workflowsPerSecond: number, rollbacks = 0): EndToEndRow {
  return {
    engine,
    workload: 'three steps',
    clients: 4,
    workflows: 400,
    seconds: 400 / workflowsPerSecond,
    workflowsPerSecond,
    stepsPerSecond: 3 * workflowsPerSecond,
    commitsPerWorkflow: 2,
    walSyncsPerWorkflow: 1,
    lifecycleCommits: 9,
    rollbacks,
  };
}

describe('summarisePeerCell', () => {
  const rounds = [
    // A slow round for everyone: the ratios do not move.
    [row('ledgerflow', 150), row('DBOS', 50), row('Restate', 100)],
    [row('ledgerflow', 300, 1), row('DBOS', 100), row('Restate', 100)],
    [row('ledgerflow', 330, 2), row('DBOS', 150), row('Restate', 110)],
  ];

  it("takes ledgerflow's ratio to each peer within each round and reports the median with its range", () => {
    const [ours] = summarisePeerCell(rounds);
    expect(ours?.engine).toBe('ledgerflow');
    // Per round: 3, 3, 2.2 against DBOS — the ratio of the medians (300 / 100) would say 3.
    expect(ours?.ratioTo?.['DBOS']).toEqual({ median: 3, min: 2.2, max: 3 });
    expect(ours?.ratioTo?.['Restate']).toEqual({ median: 3, min: 1.5, max: 3 });
  });

  it("gives each engine its median round's figures, the rollbacks of every round, and no ratio to a peer's row", () => {
    const [ours, dbos, restate] = summarisePeerCell(rounds);
    expect(ours?.workflowsPerSecond).toBe(300);
    expect(ours?.rollbacks).toBe(3);
    expect(ours?.rounds).toBe(3);
    expect(dbos?.workflowsPerSecond).toBe(100);
    expect(dbos?.ratioTo).toBeUndefined();
    expect(restate?.workflowsPerSecond).toBe(100);
  });

  it('shows the ratio with its range in the table, and alone when one round was measured', () => {
    const table = peersTable(summarisePeerCell(rounds), ['DBOS', 'Restate']);
    expect(table).toContain('| three steps | 4 | 300 | 100 | 3.00 (2.20–3.00) | 100 | 3.00 (1.50–3.00) |');
    const single = peersTable(summarisePeerCell([rounds[1]!]), ['DBOS']);
    expect(single).toContain('| three steps | 4 | 300 | 100 | 3.00 |');
  });

  it('refuses a cell with no rounds', () => {
    expect(() => summarisePeerCell([])).toThrow(/no rounds/);
  });
});

describe('rotated', () => {
  it('starts each round one engine further on, so no engine always runs first', () => {
    const engines = ['ledgerflow', 'DBOS', 'Restate'];
    expect([0, 1, 2, 3].map((round) => rotated(engines, round)[0])).toEqual([
      'ledgerflow',
      'DBOS',
      'Restate',
      'ledgerflow',
    ]);
  });
});
