import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { runCodegen, SourceCache, writeGenerated } from '../codegen/index.js';

/**
 * Codegen speed against the type checker: 200 generated workflow files in a temp project,
 * `ledgerflow codegen` (the CLI, in a child process) against `tsc --noEmit` (TypeScript 7,
 * native) on the same files, in the same run. A benchmark, not a test: it asserts nothing.
 *
 * Run: `npx tsx bench/codegen-bench.ts` (`--watch`: only runCodegenWatchBench)
 */
export interface CodegenBenchResult {
  readonly files: number;
  /** Wall time of `node bin/ledgerflow.js codegen --root <tmp>`, process start to exit. */
  readonly codegenMs: number;
  /** Wall time of `tsc --noEmit -p <tmp>`. */
  readonly tscMs: number;
  /** codegenMs / tscMs. */
  readonly ratio: number;
  /** `codegen --watch` on the examples (runCodegenWatchBench), when measured. */
  readonly watch?: CodegenWatchBenchResult;
}

export interface CodegenWatchBenchResult {
  /** The workflow file edited, relative to the copied project. */
  readonly file: string;
  readonly edits: number;
  /** Median ms from an edit to the regenerated files written, with the parsed sources kept (what --watch does). */
  readonly msPerChange: number;
  /** Median ms of the same runs with nothing kept (a fresh parse each time, as a new `codegen` process parses). */
  readonly msPerChangeUncached: number;
}

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const FILES = 200;

export async function runCodegenBench(files = FILES): Promise<CodegenBenchResult> {
  const root = mkdtempSync(path.join(tmpdir(), 'ledgerflow-codegen-bench-'));
  try {
    writeProject(root, files);
    const run = promisify(execFile);
    const codegenMs = await timed(() =>
      run(process.execPath, [path.join(REPO_ROOT, 'bin', 'ledgerflow.js'), 'codegen', '--root', root], { cwd: root }),
    );
    const tscMs = await timed(() =>
      run(path.join(REPO_ROOT, 'node_modules', '.bin', 'tsc'), ['--noEmit', '-p', path.join(root, 'tsconfig.json')], {
        cwd: root,
      }),
    );
    return { files, codegenMs, tscMs, ratio: codegenMs / tscMs };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

async function timed(action: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await action();
  return Math.round(performance.now() - started);
}

function writeProject(root: string, files: number): void {
  mkdirSync(path.join(root, 'node_modules'));
  symlinkSync(REPO_ROOT, path.join(root, 'node_modules', 'ledgerflow'), 'dir');
  for (const dependency of ['zod', '@types']) {
    symlinkSync(path.join(REPO_ROOT, 'node_modules', dependency), path.join(root, 'node_modules', dependency), 'dir');
  }
  writeFileSync(
    path.join(root, 'package.json'),
    JSON.stringify({ name: 'codegen-bench', private: true, type: 'module' }),
  );
  writeFileSync(
    path.join(root, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        lib: ['ES2023'],
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        // node_modules/ledgerflow is the repository: resolve it to the sources, as the repository does.
        customConditions: ['ledgerflow-source'],
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
      },
      include: ['workflows/**/*.workflow.ts'],
    }),
  );
  for (let i = 0; i < files; i++) {
    const dir = path.join(root, 'workflows', `group-${i % 10}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, `flow-${i}.workflow.ts`), workflowSource(i));
  }
}

/** A realistic workflow: four steps of every kind, keys from input, earlier steps and a helper. */
function workflowSource(i: number): string {
  return `import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

const PREFIX = 'flow${i}';

function scopedKey(kind: string, id: string): string {
  return \`\${PREFIX}:\${kind}:\${id.trim().toLowerCase()}\`;
}

export const flow${i} = workflow('flow-${i}', {
  version: ${1 + (i % 3)},
  input: z.object({ orderId: z.string(), customerId: z.string(), amountCents: z.number().int(), lines: z.array(z.object({ sku: z.string(), qty: z.number() })) }),
})
  .step('price', { output: z.object({ totalCents: z.number(), currency: z.enum(['eur', 'usd']) }) })
  .external('charge', {
    output: z.object({ chargeId: z.string(), amountCents: z.number() }),
    key: ({ input }) => scopedKey('charge', input.orderId),
    request: ({ input, steps }) => ({ amount: steps.price.totalCents, customer: input.customerId }),
    idempotentByKey: true,
    retry: { maxAttempts: 5, initialDelayMs: 100 },
  })
  .transactional('record', {
    output: z.object({ paymentId: z.string() }),
    key: ({ input, steps }) => \`record:\${input.orderId}:\${steps.charge.chargeId}\`,
  })
  .external('notify', {
    output: z.object({ messageId: z.string() }),
    key: ({ steps }) => \`notify:\${JSON.stringify({ payment: steps.record.paymentId, amount: Math.round(steps.charge.amountCents / 100) })}\`,
    performTimeoutMs: 5_000,
  });
`;
}

const WATCHED_EXAMPLE = 'examples/order-payment/order-payment.workflow.ts';

/**
 * What a change costs under `codegen --watch`: the repository's examples and generated/ copied
 * to a temp root, one warm-up run, then `edits` edits of the order-payment workflow file (a
 * comment, so the output stays valid), each followed by the run --watch does: runCodegen with
 * the kept SourceCache, then writeGenerated. In process, without the file watcher's latency.
 * The same edits without the cache give the cost of parsing everything again.
 *
 * Run just this: `npx tsx bench/codegen-bench.ts --watch`
 */
export async function runCodegenWatchBench(edits = 10): Promise<CodegenWatchBenchResult> {
  const root = mkdtempSync(path.join(tmpdir(), 'ledgerflow-watch-bench-'));
  try {
    for (const dir of ['examples', 'generated'])
      cpSync(path.join(REPO_ROOT, dir), path.join(root, dir), { recursive: true });
    writeFileSync(
      path.join(root, 'package.json'),
      JSON.stringify({ name: 'watch-bench', private: true, type: 'module' }),
    );
    const file = path.join(root, WATCHED_EXAMPLE);
    const original = readFileSync(file, 'utf8');
    const measure = async (cache: SourceCache | undefined): Promise<number> => {
      const times: number[] = [];
      await runCodegen({ root, ...(cache ? { cache } : {}) });
      for (let edit = 0; edit < edits; edit++) {
        writeFileSync(file, `${original}// edit ${edit}\n`);
        const started = performance.now();
        const run = await runCodegen({ root, ...(cache ? { cache } : {}) });
        if (run.generated === null)
          throw new Error(`the edited examples do not generate: ${JSON.stringify(run.diagnostics[0])}`);
        writeGenerated(run.root, run.outDir, run.generated);
        times.push(performance.now() - started);
      }
      return median(times);
    };
    const msPerChange = await measure(new SourceCache());
    const msPerChangeUncached = await measure(undefined);
    return {
      file: WATCHED_EXAMPLE,
      edits,
      msPerChange: Math.round(msPerChange),
      msPerChangeUncached: Math.round(msPerChangeUncached),
    };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

export function describeWatchBench(result: CodegenWatchBenchResult): string {
  return (
    `codegen watch: ${result.msPerChange} ms per change (median of ${result.edits} edits to ${result.file}; ` +
    `${result.msPerChangeUncached} ms parsing everything again)`
  );
}

if (
  process.argv[1] !== undefined &&
  process.argv.includes('--watch') &&
  import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href
) {
  console.log(describeWatchBench(await runCodegenWatchBench()));
} else if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const result = await runCodegenBench();
  console.log(
    `codegen on ${result.files} workflow files: ${result.codegenMs} ms; tsc --noEmit on the same files: ${result.tscMs} ms; ` +
      `ratio codegen/tsc = ${result.ratio.toFixed(2)}`,
  );
}
