import { execFile } from 'node:child_process';
import { cpSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { writeGenerated } from '../../../codegen/output/write-generated.js';
import { runCodegen, type CodegenRun } from '../../../codegen/run-codegen.js';
import { REPO_ROOT, TempProject } from './temp-project.js';

/** What {@link compileAgainstContracts} leaves for a test: the case's codegen run, the project, and tsc's output. */
export interface CompiledContracts {
  readonly run: CodegenRun;
  readonly project: TempProject;
  /** tsc's stdout (its errors, one per line), empty when everything compiled. */
  readonly output: string;
}

/**
 * Runs codegen on a golden case's input, then compiles handlers against the contracts it emits
 * the way a user's project would: the case's `shop/` copied into a throwaway project with its
 * generated code, `handlers.ts` (must compile) and `wrong-handlers.ts` (each line marked
 * `// expect-error TSnnnn` must fail with that code; see {@link expectMarkedTypeErrors}).
 */
export async function compileAgainstContracts(
  caseInput: string,
  prefix: string,
  handlers: string,
  wrong: string,
): Promise<CompiledContracts> {
  const run = await runCodegen({ root: caseInput });
  const project = new TempProject(prefix);
  cpSync(path.join(caseInput, 'shop'), path.join(project.root, 'shop'), { recursive: true });
  const copied = await runCodegen({ root: project.root });
  writeGenerated(copied.root, copied.outDir, copied.generated!);
  project.write('handlers.ts', handlers);
  project.write('wrong-handlers.ts', wrong);
  project.writeTsconfig(['shop', 'handlers.ts', 'wrong-handlers.ts']);
  const tsc = path.join(REPO_ROOT, 'node_modules', '.bin', 'tsc');
  const output = await promisify(execFile)(tsc, ['-p', 'tsconfig.json', '--pretty', 'false'], {
    cwd: project.root,
  }).then(
    (result) => result.stdout,
    (error: { stdout?: string }) => error.stdout ?? '',
  );
  return { run, project, output };
}

/** Nothing but `wrong-handlers.ts` failed, and it failed on exactly its `// expect-error TSnnnn` lines, with those codes. */
export function expectMarkedTypeErrors(output: string, wrong: string): void {
  const errors = output.split('\n').filter((line) => / error TS\d+/.test(line));
  expect(errors.filter((line) => !line.startsWith('wrong-handlers.ts'))).toEqual([]);
  const expected = wrong.split('\n').flatMap((text, index) => {
    const match = /\/\/ expect-error (TS\d+)/.exec(text);
    return match ? [`${index + 1}:${match[1]}`] : [];
  });
  const actual = [
    ...new Set(
      errors
        .map((line) => /^wrong-handlers\.ts\((\d+),\d+\): error (TS\d+)/.exec(line))
        .filter((m) => m !== null)
        .map((m) => `${m[1]}:${m[2]}`),
    ),
  ];
  expect(actual).toEqual(expected);
}
