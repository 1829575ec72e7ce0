import path from 'node:path';
import { ts } from 'ts-morph';
import { afterEach, describe, expect, it } from 'vitest';
import { AnalysisProgram } from '../../codegen/analysis/analysis-program.js';
import { normalizedSource } from '../../codegen/analysis/normalized-source.js';
import { PinnedSources, type Pin } from '../../codegen/analysis/pinned-source.js';
import { TempProject } from './support/temp-project.js';

/**
 * What LF007 compares: a part's source as a token stream that formatting and comments do not
 * change, hashed with every declaration it uses. Here on their own; the golden cases lf007-*
 * show them end to end.
 */
function tokens(source: string): string {
  const file = ts.createSourceFile('x.ts', `const x = ${source};`, ts.ScriptTarget.ES2022, true);
  const statement = file.statements[0] as ts.VariableStatement;
  return normalizedSource(statement.declarationList.declarations[0]!.initializer!, file);
}

describe('normalizedSource', () => {
  it('ignores comments, whitespace, quotes, trailing commas, optional semicolons, arrow parens and number spelling', () => {
    const same: [string, string][] = [
      ['z.object({ id: z.string() })', 'z.object({\n  // the order\n  id: z.string(), /* required */\n})'],
      ["z.enum(['a', 'b'])", 'z.enum(["a", "b",])'],
      ["z.object({ 'id': z.string() })", 'z.object({ id: z.string() })'],
      ['z.number().max(1000)', 'z.number().max(1_000.0)'],
      ['z.number().max(1e3)', 'z.number().max(0x3e8)'],
      ['(x) => x.id', 'x => x.id'],
      ['() => { const a = 1; return a; }', '() => {\n  const a = 1\n  return a\n}'],
      ['z.custom<{ a: string; b: number }>()', 'z.custom<{ a: string, b: number, }>()'],
      ['({ input }) => `k:${input.id}`', '({ input, }) => `k:${input.id}` // key'],
    ];
    for (const [a, b] of same) expect(tokens(b), `${a} ≡ ${b}`).toBe(tokens(a));
  });

  it('keeps what changes meaning, including what ASI decides and array holes', () => {
    const different: [string, string][] = [
      ['z.string()', 'z.number()'],
      ['z.string().regex(/^a+$/)', 'z.string().regex(/^a*$/)'],
      ["'a b'", "'a  b'"],
      ['`a ${b}`', '`a  ${b}`'],
      ['() => { return\nx }', '() => { return x }'],
      ['() => { a\n(b) }', '() => { a; (b) }'],
      ['[,]', '[]'],
      ['[a,,]', '[a,]'],
      ['-x', '+x'],
      ['z.object({ a: z.string() }).strict()', 'z.object({ a: z.string() })'],
    ];
    for (const [a, b] of different) expect(tokens(b), `${a} ≢ ${b}`).not.toBe(tokens(a));
  });
});

describe('PinnedSources', () => {
  let project: TempProject;
  afterEach(() => project.remove());

  /** Pins the initializer of `export const <name>` in src/main.ts after writing `files`. */
  function pin(files: Record<string, string>, name = 'part'): Pin {
    project = new TempProject('ledgerflow-pins');
    for (const [file, content] of Object.entries(files)) project.write(file, content);
    const main = path.join(project.root, 'src/main.ts');
    const program = new AnalysisProgram(project.root, [main]);
    const statement = program
      .sourceFile(main)!
      .statements.find(
        (s): s is ts.VariableStatement =>
          ts.isVariableStatement(s) && s.declarationList.declarations[0]!.name.getText() === name,
      )!;
    return PinnedSources.of(program).pin(statement.declarationList.declarations[0]!.initializer!, 'the part');
  }

  const hashOf = (files: Record<string, string>): string => {
    const result = pin(files);
    if (result.hash === undefined) throw new Error(result.problem.message);
    const hash = result.hash;
    project.remove();
    return hash;
  };

  it('follows a schema by reference, in the same file and through relative and namespace imports', () => {
    const sameFile = (field: string) => ({
      'src/main.ts': `import { z } from 'zod';\nconst Order = z.object({ ${field}: z.string() });\nexport const part = Order;\n`,
    });
    expect(hashOf(sameFile('id'))).not.toBe(hashOf(sameFile('orderId')));

    const imported = (field: string) => ({
      'src/main.ts': `import { Order } from './schemas.js';\nexport const part = Order;\n`,
      'src/schemas.ts': `import { z } from 'zod';\nexport const Order = z.object({ ${field}: z.string() });\n`,
    });
    expect(hashOf(imported('id'))).not.toBe(hashOf(imported('orderId')));

    const namespace = (field: string) => ({
      'src/main.ts': `import * as schemas from './schemas.js';\nexport const part = schemas.Order;\n`,
      'src/schemas.ts': `import { z } from 'zod';\nexport const Order = z.object({ ${field}: z.string() });\n`,
    });
    expect(hashOf(namespace('id'))).not.toBe(hashOf(namespace('orderId')));
  });

  it('follows what a part uses (a helper a key calls, a const it reads) and not what it does not', () => {
    const key = (prefix: string, unrelated: string) => ({
      'src/main.ts':
        `import { scoped } from './keys.js';\n` +
        `export const part = ({ input }: { input: { id: string } }) => scoped(input.id);\n` +
        `export const unrelated = '${unrelated}';\n`,
      'src/keys.ts': `const PREFIX = '${prefix}';\nexport function scoped(id: string): string {\n  return PREFIX + ':' + id;\n}\n`,
    });
    const base = hashOf(key('order', 'a'));
    expect(hashOf(key('order', 'b'))).toBe(base);
    expect(hashOf(key('charge', 'a'))).not.toBe(base);
  });

  it('pins an import from a package by its specifier, not by the package', () => {
    const files = (from: string) => ({
      'src/main.ts': `import { z } from '${from}';\nexport const part = z.string();\n`,
    });
    expect(hashOf(files('zod'))).not.toBe(hashOf(files('zod/mini')));
  });

  it('says when a part names something it cannot read: a package export, a let, an undeclared name, a missing module', () => {
    expect(
      pin({ 'src/main.ts': `import { Order } from '@acme/schemas';\nexport const part = Order;\n` }).problem?.message,
    ).toBe(
      'the part is `Order`, imported from package "@acme/schemas": codegen pins it by its source text and cannot read a package\'s — ' +
        'declare it in this project (this file or a relative import), so that a change to it is seen.',
    );
    project.remove();
    expect(
      pin({ 'src/main.ts': `import { z } from 'zod';\nlet Order = z.string();\nexport const part = Order;\n` }).problem
        ?.message,
    ).toBe(
      'the part is `Order`, declared with let: codegen pins it by its declaration, which only a const keeps — declare it with const.',
    );
    project.remove();
    expect(pin({ 'src/main.ts': `export const part = Order;\n` }).problem?.message).toBe(
      'the part is `Order`, which is declared neither in this file nor in a relative import: codegen pins it by its source text — declare it in one of them.',
    );
    project.remove();
    expect(
      pin({
        'src/main.ts': `import { Order } from './missing.js';\nimport { z } from 'zod';\nexport const part = z.array(Order);\n`,
      }).problem?.message,
    ).toBe(
      'the part uses `Order`, imported from "./missing.js", which codegen cannot find as a TypeScript module of this project: ' +
        'codegen pins what a run depends on by its source text — import it from a .ts file.',
    );
  });
});
