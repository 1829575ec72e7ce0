import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// What DESIGN.md promises about the tree, checked against it: every worker file has its header,
// the Glossary points at sections that exist, and "How to add a step kind" names every file that
// dispatches on the step kinds exhaustively.

const root = fileURLToPath(new URL('../..', import.meta.url));
const design = readFileSync(path.join(root, 'DESIGN.md'), 'utf8');

/** The body of the `## title` section of DESIGN.md, up to the next `## `. */
function section(title: string): string {
  const start = design.indexOf(`\n## ${title}\n`);
  expect(start, `DESIGN.md has a "## ${title}" section`).toBeGreaterThan(-1);
  const end = design.indexOf('\n## ', start + 1);
  return design.slice(start, end === -1 ? undefined : end);
}

function tsFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const relative = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return tsFiles(relative);
    return entry.name.endsWith('.ts') ? [relative] : [];
  });
}

/**
 * Whether a file has a header: its first comment, before or right after the imports, either stands
 * alone (a blank line or an import follows it) or is a doc comment of several lines on the first
 * declaration — the file's one idea, described where it is declared. A one-line doc comment of
 * a first constant or type is not a header.
 */
function hasFileHeader(text: string): boolean {
  const lines = text.split('\n');
  let i = 0;
  const skipImports = (): void => {
    while (
      i < lines.length &&
      (lines[i]!.trim() === '' || /^import\b/.test(lines[i]!) || /^\s+[\w{}, ]*,?$|^} from '/.test(lines[i]!))
    )
      i++;
  };
  const commentEnd = (): number | undefined => {
    const line = lines[i]!;
    if (line.startsWith('//')) {
      let j = i;
      while (j + 1 < lines.length && lines[j + 1]!.startsWith('//')) j++;
      return j;
    }
    if (line.startsWith('/*')) {
      let j = i;
      while (!lines[j]!.includes('*/')) j++;
      return j;
    }
    return undefined;
  };
  skipImports();
  if (i >= lines.length) return false;
  const end = commentEnd();
  if (end === undefined) return false;
  const next = lines[end + 1] ?? '';
  return next.trim() === '' || /^import\b/.test(next) || end - i >= 2;
}

describe('DESIGN.md against the tree', () => {
  it('"Layers": every file in runtime/worker/ (executors/ too) has a header comment', () => {
    expect(section('Layers')).toContain(
      'Inside the worker (`runtime/worker/`), each file with a header stating its states',
    );
    const files = tsFiles('runtime/worker');
    expect(files.length).toBeGreaterThan(30);
    expect(files.filter((file) => !hasFileHeader(readFileSync(path.join(root, file), 'utf8')))).toEqual([]);
  });

  it('tells a header from the doc comment of a declaration', () => {
    expect(
      hasFileHeader("import { a } from './a.js';\n\n/*\n * What this file is.\n */\n\nexport const b = a;\n"),
    ).toBe(true);
    expect(hasFileHeader("// What this file is.\n// More.\nimport { a } from './a.js';\n")).toBe(true);
    expect(
      hasFileHeader("import { a } from './a.js';\n\n/**\n * The b, and how it changes.\n */\nexport class B {}\n"),
    ).toBe(true);
    expect(hasFileHeader("import { a } from './a.js';\n\n/** The b. */\nexport const b = a;\n")).toBe(false);
    expect(hasFileHeader("import {\n  a,\n  c,\n} from './a.js';\n\nexport const b = a;\n")).toBe(false);
  });

  it('"Glossary": every section a definition points to exists', () => {
    const glossary = section('Glossary');
    // A heading, or its part before a colon ("The start path").
    const headings = new Set([...design.matchAll(/^## (.+)$/gm)].flatMap((m) => [m[1]!, m[1]!.split(':')[0]!]));
    const pointed = [...glossary.matchAll(/"([^"]+)"/g)]
      .map((m) => m[1]!.replace(/\s+/g, ' '))
      .filter((name) => /^[A-Z]/.test(name));
    expect(pointed.length).toBeGreaterThan(20);
    expect(pointed.filter((name) => !headings.has(name))).toEqual([]);
    expect([...glossary.matchAll(/^- \*\*([^*]+)\.\*\*/gm)].map((m) => m[1]!)).toEqual(
      expect.arrayContaining([
        'Flight',
        'Fused claim',
        'Park',
        'Horizon',
        'Adopt',
        'Take-over',
        'Carry',
        'Intent',
        'Reconciler',
        'Lease',
        'Fencing token',
        'Settle',
      ]),
    );
  });

  it('"How to add a step kind": names every file that dispatches on the kinds exhaustively, and only files that exist', () => {
    const steps = section('How to add a step kind');
    const named = [...steps.matchAll(/`([\w./-]+\/[\w./-]*)`/g)].map((m) => m[1]!);
    expect(named.filter((p) => !existsSync(path.join(root, p)))).toEqual([]);
    const exhaustive = ['dsl', 'codegen', 'runtime']
      .flatMap(tsFiles)
      .filter((file) => /Record<(Handler)?StepKind\b/.test(readFileSync(path.join(root, file), 'utf8')));
    expect(exhaustive).toContain('codegen/analysis/step-declarations.ts');
    // Named by its path, or by its name under a folder the list names.
    const mentioned = (file: string): boolean =>
      steps.includes(`\`${file}\``) ||
      (steps.includes(`\`${path.basename(file)}\``) && named.some((p) => p.endsWith('/') && file.startsWith(p)));
    expect(exhaustive.filter((file) => !mentioned(file))).toEqual([]);
  });
});
