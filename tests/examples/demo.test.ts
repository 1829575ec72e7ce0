import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { expectTheDemoClaims, runDemo } from './demo-run.js';

describe('npm start (the crash demo)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'ledgerflow-demo-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('on embedded PGlite with the default settings: one charge per order, more than one for the naive retry', async () => {
    const report = await runDemo(['--data-dir', dataDir], {});
    expect(report.store).toBe('pglite');
    expect(report.dataLocation).toContain(dataDir);
    expect(report.orders).toHaveLength(20);
    expect(report.ledgerflow.workers.filter((w) => w.outcome === 'killed')).toHaveLength(3);
    expectTheDemoClaims(report);
  }, 180_000);
});
