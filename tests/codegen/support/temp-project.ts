import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/** One workflow with one keyed external step: the codegen CLI tests edit it to provoke each finding. */
export const PAYOUT_WORKFLOW = `import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const payout = workflow('payout', { version: 1, input: z.object({ payoutId: z.string() }) })
  .external('transfer', {
    output: z.object({ transferId: z.string() }),
    key: ({ input }) => \`transfer:\${input.payoutId}\`,
    idempotentByKey: true,
  });
`;

/**
 * A throwaway project outside the repository that installs ledgerflow the way a user's project
 * would (node_modules/ledgerflow → this repository), so generated code and handlers compile
 * against the public entry points `ledgerflow/dsl` and `ledgerflow/runtime`.
 */
export class TempProject {
  readonly root: string;

  constructor(prefix: string) {
    this.root = mkdtempSync(path.join(tmpdir(), `${prefix}-`));
    mkdirSync(path.join(this.root, 'node_modules'));
    symlinkSync(REPO_ROOT, path.join(this.root, 'node_modules', 'ledgerflow'), 'dir');
    for (const dependency of ['zod', '@types']) {
      symlinkSync(
        path.join(REPO_ROOT, 'node_modules', dependency),
        path.join(this.root, 'node_modules', dependency),
        'dir',
      );
    }
    this.write('package.json', JSON.stringify({ name: 'temp-project', private: true, type: 'module' }, null, 2));
  }

  write(file: string, content: string): string {
    const absolute = path.join(this.root, file);
    mkdirSync(path.dirname(absolute), { recursive: true });
    writeFileSync(absolute, content);
    return absolute;
  }

  /** A strict NodeNext tsconfig like the repository's, including `files` and generated/. */
  writeTsconfig(files: readonly string[]): void {
    this.write(
      'tsconfig.json',
      JSON.stringify(
        {
          compilerOptions: {
            target: 'ES2022',
            lib: ['ES2023'],
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            // ledgerflow/* resolve to the repository's sources, as in its own tsconfig.json.
            customConditions: ['ledgerflow-source'],
            strict: true,
            noEmit: true,
            skipLibCheck: true,
            verbatimModuleSyntax: true,
            types: ['node'],
          },
          include: [...files, 'generated'],
        },
        null,
        2,
      ),
    );
  }

  remove(): void {
    rmSync(this.root, { recursive: true, force: true });
  }
}
