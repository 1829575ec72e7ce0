import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkDependencies, formatDiagnostic } from '../../scripts/dependency-check.js';
import { SOURCE_ROOTS } from '../../scripts/dependency-rules.js';

// The import rules of scripts/dependency-rules.ts (`npm run check:deps`): the tree keeps them, and
// a copy of it with a cycle or a forbidden import added does not.

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('import rules', () => {
  it('hold for dsl/, codegen/ and runtime/: no cycle, no forbidden import, no stale seam', () => {
    const check = checkDependencies(root);
    expect(check.diagnostics.map(formatDiagnostic)).toEqual([]);
    // A check that read nothing would pass too.
    expect(check.files.length).toBeGreaterThan(250);
    expect(check.edges.length).toBeGreaterThan(1_000);
    expect(check.edges).toContainEqual(
      expect.objectContaining({ from: 'runtime/client/client.ts', to: 'runtime/worker/worker.ts', typeOnly: true }),
    );
  });

  describe('in a copy of the tree', () => {
    let copy: string;
    beforeAll(() => {
      copy = mkdtempSync(path.join(tmpdir(), 'ledgerflow-import-rules-'));
      cpSync(path.join(root, 'package.json'), path.join(copy, 'package.json'));
      for (const dir of SOURCE_ROOTS)
        cpSync(path.join(root, dir), path.join(copy, dir), {
          recursive: true,
          filter: (from) => !from.endsWith('.sql'),
        });
      // The target of the forbidden import into tests/ below.
      cpSync(path.join(root, 'tests/support/test-stores.ts'), path.join(copy, 'tests/support/test-stores.ts'));
    });
    afterAll(() => rmSync(copy, { recursive: true, force: true }));

    /** Changes the copy for one check, then puts it back. */
    function checkWith(changes: Readonly<Record<string, (text: string) => string>>): string[] {
      const before = Object.keys(changes).map((file) => [file, readFileSync(path.join(copy, file), 'utf8')] as const);
      try {
        for (const [file, text] of before) writeFileSync(path.join(copy, file), changes[file]!(text));
        return checkDependencies(copy).diagnostics.map(formatDiagnostic);
      } finally {
        for (const [file, text] of before) writeFileSync(path.join(copy, file), text);
      }
    }

    it('report a new cycle, a type-only one too', () => {
      expect(checkWith({ 'runtime/store/millis.ts': (text) => `${text}import '../worker/claim.js';\n` })).toEqual([
        expect.stringMatching(
          /^runtime\/store\/millis\.ts:\d+:\d+ - error DEP001: import cycle: runtime\/store\/millis\.ts → runtime\/worker\/claim\.ts → runtime\/store\/millis\.ts\. /,
        ),
      ]);
      expect(
        checkWith({
          'runtime/store/leased-run.ts': (text) => `import type { ClaimOptions } from '../worker/claim.js';\n${text}`,
        }),
      ).toEqual([
        expect.stringMatching(
          /^runtime\/store\/leased-run\.ts:1:\d+ - error DEP001: import cycle: runtime\/store\/leased-run\.ts → runtime\/worker\/claim\.ts → runtime\/store\/leased-run\.ts\. /,
        ),
      ]);
    });

    it('report an import each direction rule forbids, naming the rule and where to look', () => {
      const found = checkWith({
        'dsl/index.ts': (text) => `import type { Store } from '../runtime/store/store.js';\n${text}`,
        'codegen/index.ts': (text) => `import '../runtime/errors.js';\n${text}`,
        'runtime/errors.ts': (text) => `import '../codegen/emit/naming.js';\n${text}`,
        'runtime/client/queues.ts': (text) => `import { LEASE_EXPIRED } from '../worker/claim.js';\n${text}`,
        'runtime/dashboard/html.ts': (text) => `import '../cli/format-table.js';\n${text}`,
        'runtime/store/store.ts': (text) => `import '../../tests/support/test-stores.js';\n${text}`,
      });
      expect(found.map((line) => `${line.split(' - ')[0]} ${/error (DEP\d+)/.exec(line)![1]}`)).toEqual([
        'codegen/index.ts:1:8 DEP002',
        'dsl/index.ts:1:28 DEP002',
        'runtime/client/queues.ts:1:31 DEP002',
        'runtime/dashboard/html.ts:1:8 DEP002',
        'runtime/errors.ts:1:8 DEP002',
        'runtime/store/store.ts:1:8 DEP002',
      ]);
      expect(found[2]).toContain(
        'runtime/client/queues.ts imports runtime/worker/claim.ts, but the client does not import worker internals',
      );
      expect(found[3]).toContain('what both print lives in runtime/presentation/');
    });

    it('let a type-only seam carry `import type` alone, and report a seam no import uses', () => {
      const valueImport = checkWith({
        'runtime/client/client.ts': (text) =>
          text.replace(
            "import type { Worker } from '../worker/worker.js';",
            "import { type Worker } from '../worker/worker.js';",
          ),
      });
      expect(valueImport).toEqual([
        expect.stringContaining(
          'runtime/client/client.ts imports runtime/worker/worker.ts, but the client does not import worker internals',
        ),
      ]);
      expect(valueImport[0]).toContain('allows `import type` here');
      const stale = checkWith({
        'runtime/migrate/migrate.ts': (text) => text.replace(/^import \{ releasedDefinitionHash \} from .*$/m, ''),
      });
      expect(stale).toEqual([
        expect.stringMatching(
          /^scripts\/dependency-rules\.ts:\d+:1 - error DEP004: the seam runtime\/migrate\/migrate\.ts → codegen\/emit\/workflow-version-sql\.ts matches no import any more/,
        ),
      ]);
    });

    it('report a relative import that names no file', () => {
      expect(checkWith({ 'runtime/backoff.ts': (text) => `import './no-such-module.js';\n${text}` })).toEqual([
        expect.stringContaining('runtime/backoff.ts:1:8 - error DEP003: "./no-such-module.js" names no file'),
      ]);
    });
  });
});
