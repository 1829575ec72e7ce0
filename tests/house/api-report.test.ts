import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiEntryPoints, checkApiReports, emitDeclarations, formatApiDiagnostic } from '../../scripts/api-report.js';

// The public API's reports of scripts/api-report.ts (`npm run check:api`): the tree exports what
// api/ lists, and an export added or removed, a report missing or one left over is reported.

const root = fileURLToPath(new URL('../..', import.meta.url));
const DASHBOARD = 'ledgerflow/dashboard';

describe('API reports', () => {
  it('list what each entry point of package.json exports, and no internal of the runtime', { timeout: 180_000 }, () => {
    const check = checkApiReports(root);
    expect(check.diagnostics.map(formatApiDiagnostic)).toEqual([]);
    expect(check.entryPoints.map((entry) => entry.specifier)).toEqual([
      'ledgerflow/dsl',
      'ledgerflow/runtime',
      'ledgerflow/operator',
      'ledgerflow/dashboard',
      'ledgerflow/schema',
      'ledgerflow/testing',
      'ledgerflow/codegen',
    ]);
    const runtime = readFileSync(path.join(root, 'api/runtime.api.md'), 'utf8');
    expect(runtime).toContain('export function createWorker(');
    for (const internal of [
      'tickDedupeKey',
      'ON_TIME_MS',
      'migrationChecksum',
      'describeIssues',
      'createDashboard',
      'LedgerflowDatabase',
    ]) {
      expect(runtime, internal).not.toMatch(new RegExp(`^export .*\\b${internal}\\b`, 'm'));
    }
  });

  describe('with declarations changed', () => {
    let scratch: string;
    let declarations: string;
    let dashboardDeclaration: string;
    beforeAll(() => {
      // Under the repository, so that the declarations' imports of kysely, hono and zod resolve.
      mkdirSync(path.join(root, '.tmp'), { recursive: true });
      scratch = mkdtempSync(path.join(root, '.tmp', 'api-report-test-'));
      declarations = path.join(scratch, 'declarations');
      emitDeclarations(root, declarations);
      dashboardDeclaration = path.join(
        declarations,
        apiEntryPoints(root).find((entry) => entry.specifier === DASHBOARD)!.declaration,
      );
    }, 120_000);
    afterAll(() => rmSync(scratch, { recursive: true, force: true }));

    it('report an export added and one removed, with a diff of the report', { timeout: 60_000 }, () => {
      const before = readFileSync(dashboardDeclaration, 'utf8');
      expect(before).toContain('DEFAULT_DASHBOARD_PORT, ');
      try {
        writeFileSync(
          dashboardDeclaration,
          `${before.replace('DEFAULT_DASHBOARD_PORT, ', '')}\nexport declare function mountDashboard(path: string): void;\n`,
        );
        const { diagnostics } = checkApiReports(root, { declarations, only: [DASHBOARD] });
        expect(diagnostics.map((d) => [d.code, d.file])).toEqual([['API001', 'api/dashboard.api.md']]);
        expect(diagnostics[0]!.message).toContain(
          'the exports of ledgerflow/dashboard differ from api/dashboard.api.md',
        );
        expect(diagnostics[0]!.message).toContain('npm run check:api -- --update');
        const diff = diagnostics[0]!.diff;
        expect(diff).toContain('- export const DEFAULT_DASHBOARD_PORT = 4780;');
        expect(diff).toContain('+ export function mountDashboard(path: string): void;');
        // Two hunks with their context, not the whole report.
        expect(diff.filter((line) => /^[-+] /.test(line)).length).toBeGreaterThanOrEqual(2);
        expect(diff.length).toBeLessThan(20);
        expect(formatApiDiagnostic(diagnostics[0]!)).toMatch(/^api\/dashboard\.api\.md - error API001: .*\n {4}/);
      } finally {
        writeFileSync(dashboardDeclaration, before);
      }
    });

    it('report a missing report and a stale one, and --update writes and removes them', { timeout: 60_000 }, () => {
      const reports = path.join(scratch, 'api');
      cpSync(path.join(root, 'api'), reports, { recursive: true });
      unlinkSync(path.join(reports, 'dashboard.api.md'));
      writeFileSync(path.join(reports, 'admin.api.md'), '');
      const check = checkApiReports(root, { declarations, reportFolder: reports, only: [DASHBOARD] });
      expect(check.diagnostics.map((d) => [d.code, path.basename(d.file)])).toEqual([
        ['API002', 'dashboard.api.md'],
        ['API003', 'admin.api.md'],
      ]);
      expect(check.diagnostics[1]!.message).toContain("reports no entry point of package.json's exports; delete it");

      const updated = checkApiReports(root, { declarations, reportFolder: reports, only: [DASHBOARD], update: true });
      expect(updated.diagnostics).toEqual([]);
      expect(updated.updated.map((file) => path.basename(file))).toEqual(['dashboard.api.md', 'admin.api.md']);
      expect(readFileSync(path.join(reports, 'dashboard.api.md'), 'utf8')).toBe(
        readFileSync(path.join(root, 'api/dashboard.api.md'), 'utf8'),
      );
      expect(checkApiReports(root, { declarations, reportFolder: reports, only: [DASHBOARD] }).diagnostics).toEqual([]);
    });
  });
});
