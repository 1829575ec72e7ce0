import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { formatText } from '../../codegen/report/format-diagnostics.js';
import { runCodegen } from '../../codegen/run-codegen.js';

/**
 * Golden cases: one folder per case under cases/, with
 *   case.json                 { description, emit, retire? }: what the case shows; whether its output
 *                             is golden; versions to retire (runCodegen's `retire`, the CLI's --retire)
 *   input/                    the codegen root (workflow files, helpers, an existing generated/ dir)
 *   expected/diagnostics.txt  the exact text-format diagnostics (empty: none)
 *   expected/notes.txt        the notes codegen prints, one per line (absent: none)
 *   expected/generated/       with emit: every file codegen would write, byte for byte (never a
 *                             core schema migration: that ships with the runtime, runtime/migrate/core)
 * Regenerate the expectations with UPDATE_GOLDEN=1 and review the diff.
 */
const casesDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'cases');
const update = process.env['UPDATE_GOLDEN'] === '1';

interface CaseConfig {
  readonly description: string;
  readonly emit: boolean;
  readonly retire?: readonly string[];
}

const cases = readdirSync(casesDir).sort();

describe('codegen golden cases', () => {
  it('has at least 25 invalid cases (with an error) and 10 valid ones (no diagnostic)', () => {
    const expected = cases.map((c) => readExpectedDiagnostics(c));
    expect(expected.filter((text) => text.includes(' - error LF')).length).toBeGreaterThanOrEqual(25);
    expect(cases.filter((c, i) => c.startsWith('valid-') && expected[i] === '').length).toBeGreaterThanOrEqual(10);
  });

  for (const name of cases) {
    const config = readConfig(name);
    it(`${name}: ${config.description}`, async () => {
      const caseDir = path.join(casesDir, name);
      const run = await runCodegen({
        root: path.join(caseDir, 'input'),
        ...(config.retire === undefined ? {} : { retire: config.retire }),
      });
      const diagnostics = formatText(run.diagnostics);
      const notes = run.notes.map((note) => `${note}\n`).join('');
      const expectedDir = path.join(caseDir, 'expected');
      const diagnosticsFile = path.join(expectedDir, 'diagnostics.txt');
      const notesFile = path.join(expectedDir, 'notes.txt');
      const generatedDir = path.join(expectedDir, 'generated');
      const generated: Record<string, string> = Object.fromEntries(
        (run.generated ?? []).map((f) => [f.path, f.content]),
      );
      expect(
        Object.keys(generated).filter((file) => /^migrations\/0001_/.test(file)),
        'codegen never writes a 0001 migration',
      ).toEqual([]);

      if (update) {
        rmSync(expectedDir, { recursive: true, force: true });
        mkdirSync(expectedDir, { recursive: true });
        writeFileSync(diagnosticsFile, diagnostics);
        if (notes !== '') writeFileSync(notesFile, notes);
        if (config.emit) {
          for (const [file, content] of Object.entries(generated)) {
            mkdirSync(path.dirname(path.join(generatedDir, file)), { recursive: true });
            writeFileSync(path.join(generatedDir, file), content);
          }
        }
      }

      expect(diagnostics).toBe(readFileSync(diagnosticsFile, 'utf8'));
      expect(notes).toBe(existsSync(notesFile) ? readFileSync(notesFile, 'utf8') : '');
      if (config.emit) {
        expect(run.generated, 'an emitting case must have no errors').not.toBeNull();
        expect(generated).toEqual(readTree(generatedDir));
      } else if (name.startsWith('valid-')) {
        expect(diagnostics).toBe('');
      } else {
        expect(diagnostics, 'an invalid case must report something').not.toBe('');
      }
    });
  }
});

function readConfig(name: string): CaseConfig {
  return JSON.parse(readFileSync(path.join(casesDir, name, 'case.json'), 'utf8')) as CaseConfig;
}

function readExpectedDiagnostics(name: string): string {
  const file = path.join(casesDir, name, 'expected', 'diagnostics.txt');
  return existsSync(file) ? readFileSync(file, 'utf8') : '';
}

function readTree(dir: string, prefix = ''): Record<string, string> {
  if (!existsSync(dir)) return {};
  const files: Record<string, string> = {};
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const relative = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
    if (entry.isDirectory()) Object.assign(files, readTree(path.join(dir, entry.name), relative));
    else files[relative] = readFileSync(path.join(dir, entry.name), 'utf8');
  }
  return files;
}
