import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isEffectKind, type StepKind } from '../../dsl/step-kind.js';
import { runCodegen, type CodegenRun } from '../../codegen/run-codegen.js';
import { REPO_ROOT, TempProject } from './support/temp-project.js';

/**
 * The repository's own examples: they pass codegen, and deleting the key of any of their
 * effect, child or forEach steps (in a temp copy, never in the repo) is LF001 at that step.
 */
let repo: CodegenRun;
let project: TempProject;

beforeAll(async () => {
  repo = await runCodegen({ root: REPO_ROOT });
  project = new TempProject('ledgerflow-examples');
  cpSync(path.join(REPO_ROOT, 'examples'), path.join(project.root, 'examples'), { recursive: true });
  cpSync(path.join(REPO_ROOT, 'generated'), path.join(project.root, 'generated'), { recursive: true });
});

afterAll(() => project?.remove());

describe('examples', () => {
  it('declare workflows that pass every codegen rule', () => {
    expect(repo.analysis.workflows.length).toBeGreaterThan(0);
    expect(repo.diagnostics).toEqual([]);
  });

  it('report LF001 at the step when any effect, child or forEach step loses its key', async () => {
    const keyed = (kind: StepKind): boolean => isEffectKind(kind) || kind === 'child' || kind === 'forEach';
    const effects = repo.analysis.workflows.flatMap((w) => w.steps.filter((s) => keyed(s.kind)).map((s) => ({ w, s })));
    expect(effects.some(({ s }) => s.kind === 'forEach')).toBe(true);
    expect(effects.length).toBeGreaterThan(0);
    for (const { w, s } of effects) {
      const file = path.join(project.root, w.file);
      const original = readFileSync(file, 'utf8');
      writeFileSync(file, withoutKey(original, s.key!.location.line, s.key!.text));
      try {
        const run = await runCodegen({ root: project.root });
        const lf001 = run.diagnostics.filter((d) => d.code === 'LF001');
        expect(lf001, `${w.name}.${s.name}`).toEqual([
          expect.objectContaining({ file: w.file, line: s.location.line, col: s.location.col, severity: 'error' }),
        ]);
        expect(lf001[0]!.message).toContain(`step "${s.name}" has no key`);
      } finally {
        writeFileSync(file, original);
      }
    }
  });
});

/** Removes `key: <text>,` starting on `line` (1-based), however many lines the key spans. */
function withoutKey(source: string, line: number, text: string): string {
  const lineStart =
    source
      .split('\n')
      .slice(0, line - 1)
      .join('\n').length + (line > 1 ? 1 : 0);
  const start = source.indexOf('key', lineStart);
  const end = source.indexOf(text, start) + text.length;
  const afterComma = source[end] === ',' ? end + 1 : end;
  expect(source.slice(start, end)).toMatch(/^key\s*:\s*/);
  return source.slice(0, start) + source.slice(afterComma);
}
