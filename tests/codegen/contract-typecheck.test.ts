import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeGenerated } from '../../codegen/output/write-generated.js';
import { runCodegen } from '../../codegen/run-codegen.js';
import { REPO_ROOT, TempProject } from './support/temp-project.js';

/**
 * The generated contract is what stops a handler from bypassing the ledger; these tests compile
 * handlers against it with the project's own tsc. The wrong handlers mark every line that must
 * fail with `// expect-error TSnnnn`; the test demands exactly those errors, no fewer, no more.
 */
const WORKFLOW = `import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const refund = workflow('refund', { version: 1, input: z.object({ orderId: z.string() }) })
  .step('load', { output: z.object({ amountCents: z.number() }) })
  .transactional('reserve', {
    output: z.object({ reservationId: z.string() }),
    key: ({ input }) => \`reserve:\${input.orderId}\`,
  })
  .external('pay', {
    output: z.object({ paymentId: z.string() }),
    key: ({ input }) => \`pay:\${input.orderId}\`,
    idempotentByKey: true,
  })
  .external('notify', {
    output: z.object({ messageId: z.string() }),
    key: ({ steps }) => \`notify:\${steps.pay.paymentId}\`,
  });
`;

const PREAMBLE = `import { found, notFound } from 'ledgerflow/runtime';
import { refundHandlers, type RefundHandlers } from './generated/index.js';

interface AppDatabase {
  reservation: { id: string; order_id: string };
}
`;

const CORRECT = `${PREAMBLE}
export const handlers: RefundHandlers<AppDatabase> = {
  load: ({ input }) => ({ amountCents: input.orderId.length * 100 }),
  reserve: async (ctx) => {
    await ctx.tx.insertInto('reservation').values({ id: ctx.key, order_id: ctx.input.orderId }).execute();
    return ctx.record({ reservationId: ctx.key });
  },
  pay: {
    async perform({ key, steps }) {
      return { paymentId: \`\${key}:\${steps.load.amountCents}\` };
    },
  },
  notify: {
    async perform({ steps }) {
      return { messageId: \`mail:\${steps.reserve.reservationId}:\${steps.pay.paymentId}\` };
    },
    async reconcile({ key, intent }) {
      return intent.attempt > 1 ? found({ messageId: key }) : notFound();
    },
  },
};

export const registration = refundHandlers<AppDatabase>(handlers);
`;

const WRONG = `${PREAMBLE}
export const registration = refundHandlers<AppDatabase>({
  load: ({ steps }) => ({ amountCents: steps.pay.paymentId.length }), // expect-error TS2339
  // Returns a plain value instead of ctx.record(...): it could have written anywhere.
  reserve: async (ctx) => ({ reservationId: ctx.key }), // expect-error TS2322
  pay: {
    async perform({ key }) { // expect-error TS2322
      return { paymentId: 42, key };
    },
  },
  // The provider does not dedupe, so the contract requires reconcile.
  notify: { // expect-error TS2741
    async perform({ key }) {
      return { messageId: key };
    },
  },
});

// ctx.tx is typed with the app's database: a table it does not declare does not exist there.
export const writesOutsideTheLedger: RefundHandlers<AppDatabase>['reserve'] = async (ctx) => {
  await ctx.tx.insertInto('audit_log').values({ id: ctx.key }).execute(); // expect-error TS2345
  return ctx.record({ reservationId: ctx.key });
};
`;

interface CompilerError {
  readonly file: string;
  readonly line: number;
  readonly code: string;
  readonly message: string;
}

let project: TempProject;
let errors: CompilerError[];

beforeAll(async () => {
  project = new TempProject('ledgerflow-contract');
  project.write('refund.workflow.ts', WORKFLOW);
  const run = await runCodegen({ root: project.root });
  expect(run.diagnostics).toEqual([]);
  writeGenerated(run.root, run.outDir, run.generated!);
  project.write('correct-handlers.ts', CORRECT);
  project.write('wrong-handlers.ts', WRONG);
  project.writeTsconfig(['refund.workflow.ts', 'correct-handlers.ts', 'wrong-handlers.ts']);
  errors = await typecheck(project.root);
});

afterAll(() => project?.remove());

describe('generated handler contract', () => {
  it('compiles itself and accepts handlers that go through the ledger', () => {
    const inProject = errors.filter(
      (e) => !e.file.startsWith('..') && !e.file.startsWith('/') && e.file !== 'wrong-handlers.ts',
    );
    expect(inProject).toEqual([]);
  });

  it('rejects each deliberately wrong handler at its line, with the expected error', () => {
    const expected = WRONG.split('\n').flatMap((text, index) => {
      const match = /\/\/ expect-error (TS\d+)/.exec(text);
      return match ? [{ line: index + 1, code: match[1]! }] : [];
    });
    const actual = [
      ...new Set(errors.filter((e) => e.file === 'wrong-handlers.ts').map((e) => `${e.line}:${e.code}`)),
    ].map((id) => ({ line: Number(id.split(':')[0]), code: id.split(':')[1] }));
    expect(actual).toEqual(expected);
  });

  it('names what is wrong: a missing reconcile and a plain return instead of ctx.record()', () => {
    const wrong = errors.filter((e) => e.file === 'wrong-handlers.ts');
    expect(wrong.find((e) => e.code === 'TS2741')?.message).toContain("Property 'reconcile' is missing");
    expect(
      wrong.find((e) => e.line === WRONG.split('\n').findIndex((l) => l.includes('reserve: async')) + 1)?.message,
    ).toContain('Recorded');
  });
});

async function typecheck(root: string): Promise<CompilerError[]> {
  const tsc = path.join(REPO_ROOT, 'node_modules', '.bin', 'tsc');
  const output = await promisify(execFile)(tsc, ['-p', 'tsconfig.json', '--pretty', 'false'], { cwd: root }).then(
    (result) => result.stdout,
    (error: { stdout?: string }) => error.stdout ?? '',
  );
  const parsed: CompilerError[] = [];
  for (const line of output.split('\n')) {
    const match = /^(.+?)\((\d+),\d+\): error (TS\d+): (.*)$/.exec(line);
    if (match) parsed.push({ file: match[1]!, line: Number(match[2]), code: match[3]!, message: match[4]! });
    else if (line.startsWith(' ') && parsed.length > 0) {
      const last = parsed.pop()!;
      parsed.push({ ...last, message: `${last.message}\n${line}` });
    }
  }
  return parsed;
}
