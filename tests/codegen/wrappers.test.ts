import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCodegen, type CodegenRun } from '../../codegen/run-codegen.js';
import { TempProject } from './support/temp-project.js';

/**
 * Every wrapper that leaves a value alone — `(x)`, `x as T`, `x satisfies T`, `x!`, `<T>x` — is
 * looked through alike: by the workflow declaration reader and by the mutable-literal check.
 */
const SOURCE = `import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const AS_TYPE = ['a'] as string[];
const ANGLE_TYPE = <string[]>['a'];
const NON_NULL = { a: 'a' }!;
const AS_CONST = ['a'] as const;
const ANGLE_CONST = <const>['a'];

const input = z.object({ id: z.string() });
const output = z.object({});

export const nonNull = workflow('non-null', { version: 1, input })
  .external('call', { output, key: ({ input }) => \`\${input.id}\`, idempotentByKey: true })!;

export const angle = <typeof nonNull>workflow('angle', { version: 1, input })
  .external('call', { output, key: ({ input }) => \`\${input.id}\`, idempotentByKey: true });

export const reads = workflow('reads', { version: 1, input })
  .external('asType', { output, key: ({ input }) => \`\${AS_TYPE[0]}\${input.id}\`, idempotentByKey: true })
  .external('angleType', { output, key: ({ input }) => \`\${ANGLE_TYPE[0]}\${input.id}\`, idempotentByKey: true })
  .external('nonNull', { output, key: ({ input }) => \`\${NON_NULL.a}\${input.id}\`, idempotentByKey: true })
  .external('asConst', { output, key: ({ input }) => \`\${AS_CONST[0]}\${input.id}\`, idempotentByKey: true })
  .external('angleConst', { output, key: ({ input }) => \`\${ANGLE_CONST[0]}\${input.id}\`, idempotentByKey: true });
`;

let project: TempProject;
let run: CodegenRun;

beforeAll(async () => {
  project = new TempProject('ledgerflow-wrappers');
  project.write('src/wrapped.workflow.ts', SOURCE);
  run = await runCodegen({ root: project.root });
});

afterAll(() => project.remove());

describe('value-preserving wrappers', () => {
  it('do not hide a workflow declaration: `workflow(...)...!` and `<T>workflow(...)...` are read like `as T`', () => {
    expect(run.diagnostics.filter((d) => d.code === 'LF008')).toEqual([]);
    expect(run.analysis.workflows.map((w) => w.exportName)).toEqual(['nonNull', 'angle', 'reads']);
  });

  it('do not hide a mutable module literal: `<T>[...]` and `{...}!` are LF004 like `[...] as T`; `<const>` freezes like `as const`', () => {
    const lf004 = run.diagnostics
      .filter((d) => d.code === 'LF004')
      .map((d) => d.message.match(/^key of step "(\w+)"/)?.[1]);
    expect(lf004).toEqual(['asType', 'angleType', 'nonNull']);
  });
});
