import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import type { AnySchedule, AnyWorkflow } from 'ledgerflow/dsl';
import { createClient, createWorker, migrate, type Store, type WorkflowRegistration } from 'ledgerflow/runtime';
import { afterAll, describe, expect, it } from 'vitest';
import { DIAGNOSTIC_CODES } from '../../codegen/model/diagnostic.js';
import { waitUntil } from '../runtime/fixtures/run-helpers.js';
import { runCli } from '../support/run-cli.js';
import { createPGliteTestStore, createPgTestStore, type TestStore } from '../support/test-stores.js';
import {
  directiveAt,
  docFiles,
  fileRegion,
  headingAnchors,
  markdownLinks,
  readmeBlocks,
  type ReadmeBlock,
} from './readme-blocks.js';

/**
 * Every code block of the user documentation — README.md and every docs/**\/*.md — must be real.
 * Each carries a directive on the line above saying how that is proven, and this file proves it:
 *
 * - `include: path[#region]`  equals the file (or its `#region`) in the repository;
 * - `excerpt: path`           appears verbatim in that file (e.g. generated/REVIEW.md);
 * - `file: path`              a tutorial file: all of them are written to a scratch project,
 *                             `ledgerflow codegen` runs on it and `tsc` type-checks the result;
 * - `codegen-input: path`     a broken workflow: codegen runs on it alone, and the following
 *   + `output: codegen-input` block is exactly what it prints;
 * - `cli-help: command`       is what `ledgerflow <command> --help` prints (up to the global options);
 * - no directive, `sh`        every line is a command that exists, with options that exist.
 *
 * The `file:` blocks of all files make one scratch project (the tutorial's chapters build on each
 * other), run as written below. Links between the files are checked, #anchors included.
 */
const root = fileURLToPath(new URL('../..', import.meta.url));
const docs = docFiles(root);
const blocks = docs.flatMap((doc) => readmeBlocks(doc.text, doc.path));
const run = promisify(execFile);
const scratch: string[] = [];

afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** A scratch project inside the repository (under the ignored .ledgerflow/), so `ledgerflow/*` resolves. */
function scratchDir(name: string): string {
  const dir = join(root, '.ledgerflow', `readme-${name}-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  scratch.push(dir);
  return dir;
}

function writeFiles(dir: string, files: ReadonlyArray<{ path: string; content: string }>): void {
  for (const file of files) {
    mkdirSync(dirname(join(dir, file.path)), { recursive: true });
    writeFileSync(join(dir, file.path), `${file.content}\n`);
  }
}

/** Runs the CLI as a user would; resolves with the exit code instead of throwing on non-zero. */
async function ledgerflow(
  args: readonly string[],
  options: { readonly cwd?: string; readonly env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [join(root, 'bin/ledgerflow.js'), ...args], {
      cwd: options.cwd ?? root,
      ...(options.env !== undefined ? { env: options.env } : {}),
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

/** `ledgerflow [command] --help`, run once per command for all tests; '' when there is no such command. */
const helps = new Map<string, Promise<string>>();
function helpOf(command: string): Promise<string> {
  let help = helps.get(command);
  if (help === undefined) {
    help = runCli(command === '' ? ['--help'] : [command, '--help']).then((r) => (r.code === 0 ? r.stdout : ''));
    helps.set(command, help);
  }
  return help;
}

const at = (block: ReadmeBlock): string => `${block.file}:${block.line}`;
const withDirective = (kind: string) => blocks.filter((b) => b.directive?.kind === kind);

describe('the code blocks of README.md and docs/', () => {
  it('every block says how it is proven real', () => {
    const known = new Set(['include', 'excerpt', 'file', 'codegen-input', 'output', 'cli-help']);
    const unproven = blocks
      .filter((b) => (b.directive === undefined ? b.lang !== 'sh' : !known.has(b.directive.kind)))
      .map((b) => `${at(b)} (\`\`\`${b.lang}${b.directive ? `, directive "${b.directive.kind}"` : ''})`);
    expect(
      unproven,
      'Put <!-- include: path#region -->, <!-- file: path -->, <!-- cli-help: cmd --> … above each block, or make it a sh block of real commands',
    ).toEqual([]);
    expect(blocks.length).toBeGreaterThan(20);
  });

  it.each(withDirective('include').map((b) => [at(b), b] as const))(
    '%s equals the file it includes',
    (where, block) => {
      const [path, region] = block.directive!.argument.split('#') as [string, string | undefined];
      const text = readFileSync(join(root, path), 'utf8');
      expect(block.content, `${where}: copy ${path}${region ? ` region ${region}` : ''} into ${block.file} again`).toBe(
        fileRegion(text, region, where),
      );
    },
  );

  it.each(withDirective('excerpt').map((b) => [at(b), b] as const))(
    '%s appears verbatim in its file',
    (where, block) => {
      const path = block.directive!.argument;
      expect(
        readFileSync(join(root, path), 'utf8').includes(block.content),
        `${where}: the excerpt is no longer in ${path}`,
      ).toBe(true);
    },
  );

  it('the tutorial files pass codegen and type-check against the generated contract', async () => {
    const dir = scratchDir('tutorial');
    const files = withDirective('file').map((b) => ({ path: b.directive!.argument, content: b.content }));
    expect(files.map((f) => f.path)).toContain('src/refund.workflow.ts');
    writeFiles(dir, files);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({ extends: '../../tsconfig.json', include: ['**/*.ts'], exclude: [] }),
    );

    const codegen = await runCli(['codegen', '--root', dir]);
    expect(codegen.code, codegen.stdout + codegen.stderr).toBe(0);
    expect(existsSync(join(dir, 'generated/contracts/refund.v1.ts'))).toBe(true);
    expect((await runCli(['codegen', '--root', dir, '--check'])).code).toBe(0);

    const tsc = join(root, 'node_modules/.bin/tsc');
    const typecheck = await run(tsc, ['-p', join(dir, 'tsconfig.json'), '--noEmit'], { cwd: root }).then(
      () => '',
      (error: { stdout?: string }) => error.stdout ?? String(error),
    );
    expect(typecheck, 'the tutorial does not type-check').toBe('');

    // The same check must be able to fail: a wrong handler is refused by the generated contract.
    const handlers = files.find((f) => f.path === 'src/refund.handlers.ts')!;
    writeFiles(dir, [
      {
        path: 'src/refund.handlers.ts',
        content: handlers.content.replace('return ctx.record({ refundId', 'return ({ refundId'),
      },
    ]);
    const broken = await run(tsc, ['-p', join(dir, 'tsconfig.json'), '--noEmit'], { cwd: root }).then(
      () => '',
      (error: { stdout?: string }) => error.stdout ?? String(error),
    );
    expect(broken).toMatch(/src\/refund\.handlers\.ts\(\d+,\d+\): error TS/);
    // codegen and tsc over the whole tutorial project: 35–50 s on a shared 2-core machine, past 60 s beside other test forks.
  }, 120_000);

  it('the diagnostics shown are what codegen prints for the broken workflow shown', async () => {
    const inputs = withDirective('codegen-input');
    const outputs = blocks.filter((b) => b.directive?.kind === 'output' && b.directive.argument === 'codegen-input');
    expect(inputs).toHaveLength(1);
    expect(outputs).toHaveLength(1);
    const dir = scratchDir('diagnostics');
    writeFiles(dir, [{ path: inputs[0]!.directive!.argument, content: inputs[0]!.content }]);
    const result = await runCli(['codegen', '--root', dir]);
    expect(result.code).toBe(1);
    const timing = (text: string) => text.trim().replace(/\(\d+ ms\)/g, '(… ms)');
    expect(timing(outputs[0]!.content), `${at(outputs[0]!)}: paste codegen's current output`).toBe(
      timing(result.stdout),
    );
  }, 30_000);

  it('the CLI reference is what the CLI prints', async () => {
    const reference = withDirective('cli-help');
    const commands = reference.map((b) => b.directive!.argument);
    expect(commands.sort()).toEqual([
      '',
      'audit',
      'cancel',
      'codegen',
      'dashboard',
      'dev',
      'effects',
      'grants',
      'init',
      'limits',
      'migrate',
      'prune',
      'queues',
      'reconcile',
      'resolve',
      'retry',
      'run',
      'runs',
      'schedules',
      'send-event',
      'signal',
      'start',
      'versions',
      'worker',
    ]);
    await Promise.all(
      reference.map(async (block) => {
        const command = block.directive!.argument;
        const stdout = await helpOf(command);
        // Per command, the shared global options and exit codes are documented once, above.
        const expected = command === '' || command === 'codegen' ? stdout : stdout.split('\nGlobal options:')[0]!;
        expect(block.content.trim(), `${at(block)}: paste \`ledgerflow ${command} --help\` again`).toBe(
          expected.trim(),
        );
      }),
    );
  }, 60_000);

  it('shell commands name scripts, commands and options that exist', async () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    const yaml = withDirective('include').filter((b) => b.lang === 'yaml');
    const lines = [
      ...blocks
        .filter((b) => b.lang === 'sh' && b.directive === undefined)
        .flatMap((b) => b.content.split('\n').map((l) => [at(b), l] as const)),
      ...yaml.flatMap((b) =>
        b.content
          .split('\n')
          .flatMap((l) => (/^\s*- run: /.test(l) ? [[at(b), l.replace(/^\s*- run: /, '')] as const] : [])),
      ),
    ];
    const problems: string[] = [];
    for (const [where, line] of lines) {
      for (const command of line
        .split('&&')
        .map((c) => c.trim())
        .filter((c) => c !== '' && !c.startsWith('#'))) {
        const words = command.match(/'[^']*'|"[^"]*"|\S+/g) ?? [];
        if (words[0] === 'export' && /^[A-Z_]+=/.test(words[1] ?? '')) continue;
        if (words[0] === 'npm') {
          const script = words[1] === 'run' ? words[2] : words[1];
          if (['install', 'ci'].includes(words[1] ?? '')) continue;
          if (script === undefined || !(script in pkg.scripts))
            problems.push(`${where}: npm script "${script}" does not exist`);
          continue;
        }
        if (words[0] === 'npx' && words[1] === 'ledgerflow') {
          const help = await helpOf(words[2] ?? '');
          if (help === '') {
            problems.push(`${where}: "ledgerflow ${words[2]}" is not a command`);
            continue;
          }
          for (const option of words.slice(3).filter((w) => w.startsWith('-'))) {
            if (!new RegExp(`(^|\\s)${option}[\\s,]`, 'm').test(help))
              problems.push(`${where}: ledgerflow ${words[2]} has no option ${option}`);
          }
          continue;
        }
        problems.push(`${where}: "${command}" is not a command this test knows how to check`);
      }
    }
    expect(problems).toEqual([]);
    expect(lines.map(([, l]) => l)).toEqual(expect.arrayContaining(['npm install && npm start', 'npm test']));
  }, 60_000);

  it('the diagnostic code table lists exactly the codes codegen has', () => {
    const tables = docs.flatMap((doc) => {
      const lines = doc.text.split('\n');
      const start = lines.findIndex((_, i) => directiveAt(lines, i)?.kind === 'diagnostic-codes');
      return start === -1 ? [] : [{ doc, lines, start }];
    });
    expect(
      tables.map((t) => t.doc.path),
      'one <!-- diagnostic-codes --> table',
    ).toEqual(['docs/reference/diagnostics.md']);
    const { lines, start } = tables[0]!;
    const rows = lines
      .slice(start + 1)
      .filter((_l, i, all) => all.slice(0, i + 1).every((x) => x.startsWith('|')))
      .flatMap((l) => {
        const match = /^\| (LF\d{3}) \| (.*) \|$/.exec(l);
        return match === null ? [] : [[match[1]!, match[2]!] as const];
      });
    expect(Object.fromEntries(rows)).toEqual(DIAGNOSTIC_CODES);
  });

  it('relative links point at files that exist, and #anchors at headings that exist', () => {
    const anchorsOf = new Map(docs.map((doc) => [doc.path, headingAnchors(doc.text)]));
    const broken: string[] = [];
    let count = 0;
    for (const doc of docs) {
      for (const { line, target } of markdownLinks(doc.text)) {
        if (/^[a-z][a-z+.-]*:/i.test(target)) continue;
        count += 1;
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const resolved = path === '' ? doc.path : posix.normalize(posix.join(posix.dirname(doc.path), path));
        if (resolved.startsWith('..') || !existsSync(join(root, resolved))) {
          broken.push(`${doc.path}:${line}: ${target} (no file ${resolved})`);
          continue;
        }
        if (anchor === undefined) continue;
        const anchors =
          anchorsOf.get(resolved) ??
          (resolved.endsWith('.md') ? headingAnchors(readFileSync(join(root, resolved), 'utf8')) : undefined);
        if (anchors !== undefined && !anchors.has(anchor))
          broken.push(`${doc.path}:${line}: ${target} (no heading #${anchor} in ${resolved})`);
      }
    }
    expect(count).toBeGreaterThan(100);
    expect(broken).toEqual([]);
  });

  it('docs/README.md links every page of docs/', () => {
    const index = docs.find((doc) => doc.path === 'docs/README.md')!;
    const linked = new Set(
      markdownLinks(index.text).map(({ target }) => posix.normalize(posix.join('docs', target.split('#')[0]!))),
    );
    expect(
      docs
        .map((doc) => doc.path)
        .filter((path) => path.startsWith('docs/') && path !== 'docs/README.md' && !linked.has(path)),
    ).toEqual([]);
  });

  it("the README stays short, and no page tells the project's history", () => {
    expect(docs.find((doc) => doc.path === 'README.md')!.text.split('\n').length).toBeLessThanOrEqual(300);
    const history = docs.flatMap((doc) =>
      doc.text
        .split('\n')
        .flatMap((line, i) =>
          /\bissues? #?\d+|\blast round\b|\bbefore (it|this) was fixed\b/i.test(line)
            ? [`${doc.path}:${i + 1}: ${line.trim()}`]
            : [],
        ),
    );
    expect(history, 'say what is true, not when it became true').toEqual([]);
  });
});

describe('the tutorial, run as written', () => {
  const pgStores: TestStore[] = [];
  afterAll(async () => {
    for (const store of pgStores) await store.close();
  });

  // The tutorial's src/workflows.ts opens no pool of its own: its handlers use ctx.db / ctx.tx,
  // so the same files run on the embedded default and on PostgreSQL. Stripe is the only stub.
  it.each(['embedded PGlite', 'PostgreSQL'] as const)(
    'migrate, start and the worker of tutorial chapter 5 complete a refund on %s, with one Stripe call',
    async (where) => {
      const dir = scratchDir(where === 'PostgreSQL' ? 'run-pg' : 'run-pglite');
      writeFiles(
        dir,
        withDirective('file').map((b) => ({ path: b.directive!.argument, content: b.content })),
      );
      // The order and the charge a refund starts from (test data, not part of the tutorial).
      writeFiles(dir, [
        {
          path: 'db/migrations/0002_test_data.sql',
          content: "INSERT INTO shop.\"order\" (id) VALUES ('o-1');\nINSERT INTO shop.payment VALUES ('o-1', 'ch_1');",
        },
      ]);
      const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: '' };
      if (where === 'PostgreSQL') {
        const store = await createPgTestStore();
        pgStores.push(store);
        env['DATABASE_URL'] = store.url;
      }
      const cli = (args: readonly string[]) => ledgerflow(args, { cwd: dir, env });
      const step = async (args: readonly string[]) => {
        const result = await cli(args);
        expect(result.code, `ledgerflow ${args.join(' ')}:\n${result.stdout}${result.stderr}`).toBe(0);
        return result;
      };

      await step(['codegen']);
      await step(['migrate', '--dir', 'generated/migrations', '--dir', 'db/migrations']);
      const started = await step([
        'start',
        'refund',
        '--input',
        '{"orderId":"o-1","amountCents":1200}',
        '--dedupe-key',
        'refund:o-1',
        '--json',
      ]);
      const { runId } = JSON.parse(started.stdout) as { runId: string };

      const stripeLog = join(dir, 'stripe-calls.jsonl');
      const worker = spawn(
        process.execPath,
        [join(root, 'bin/ledgerflow.js'), 'worker', '--workflows', 'src/workflows.ts', '--poll-ms', '100'],
        {
          cwd: dir,
          env: {
            ...env,
            STRIPE_STUB_LOG: stripeLog,
            NODE_OPTIONS: `${env['NODE_OPTIONS'] ?? ''} --import ${pathToFileURL(join(root, 'tests/readme/fixtures/stripe-stub.mjs')).href}`,
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let output = '';
      worker.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      worker.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => worker.on('exit', (code) => resolve(code)));
      try {
        const deadline = Date.now() + 45_000;
        while (!output.includes(`run-completed runId=${runId}`)) {
          if (Date.now() > deadline || worker.exitCode !== null)
            throw new Error(`the worker did not complete ${runId}:\n${output}`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      } finally {
        worker.kill('SIGTERM');
      }
      expect(await exited).toBe(0);

      const shown = await step(['run', runId, '--json']);
      const details = JSON.parse(shown.stdout) as { status: string; output: unknown };
      expect(details.status).toBe('completed');
      expect(details.output).toEqual({
        findCharge: { chargeId: 'ch_1' },
        refundCharge: { refundId: 're_test_1' },
        markRefunded: { refundId: 're_test_1' },
      });
      const calls = readFileSync(stripeLog, 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { key: string; body: string });
      expect(calls).toEqual([
        { url: 'https://api.stripe.com/v1/refunds', key: 'refund:o-1', body: 'charge=ch_1&amount=1200' },
      ]);
    },
    // Six CLI processes, each loading the CLI and (on PGlite) opening and migrating the embedded
    // database: 20–40 s on a quiet 2-core machine, past 60 s beside two other test forks.
    180_000,
  );

  it('the workflows of tutorial chapter 7 wait, branch and compose as written (embedded PGlite, in process)', async () => {
    const dir = scratchDir('waits');
    writeFiles(
      dir,
      withDirective('file').map((b) => ({ path: b.directive!.argument, content: b.content })),
    );
    writeFiles(dir, [
      {
        path: 'db/migrations/0002_test_data.sql',
        content:
          "INSERT INTO shop.\"order\" (id) VALUES ('o-1'), ('o-2'), ('o-3'), ('o-4'), ('o-5');\nINSERT INTO shop.payment VALUES ('o-1', 'ch_1'), ('o-3', 'ch_3'), ('o-4', 'ch_4');",
      },
    ]);
    const codegen = await runCli(['codegen', '--root', dir]);
    expect(codegen.code, codegen.stdout + codegen.stderr).toBe(0);
    const store = await createPGliteTestStore();
    try {
      await migrate(store, { sources: [join(dir, 'generated/migrations'), join(dir, 'db/migrations')] });
      const load = async <T>(path: string): Promise<T> => (await import(join(dir, path))) as T;
      const { refundRegistration } = await load<{
        refundRegistration(payments: TutorialPayments): WorkflowRegistration;
      }>('src/refund.handlers.ts');
      const { waitingWorkflows } = await load<{ waitingWorkflows: WorkflowRegistration[] }>('src/waiting-workflows.ts');
      const { onPaymentSettled } = await load<{
        onPaymentSettled(store: Store, n: { id: string; orderId: string; chargeId: string }): Promise<void>;
      }>('src/payment-webhook.ts');
      const desk = await load<{
        askForApproval(store: Store, orderId: string, amountCents: number): Promise<string>;
        approve(store: Store, runId: string, approvedBy: string): Promise<void>;
        withdraw(store: Store, runId: string): Promise<boolean>;
      }>('src/refund-desk.ts');
      const { checkout } = await load<{ checkout: AnyWorkflow }>('src/checkout.workflow.ts');
      const { refundApproval } = await load<{ refundApproval: AnyWorkflow }>('src/refund-approval.workflow.ts');
      const { scheduledRefund } = await load<{ scheduledRefund: AnyWorkflow }>('src/scheduled-refund.workflow.ts');
      const { refundRecall } = await load<{ refundRecall: AnyWorkflow }>('src/refund-recall.workflow.ts');

      // Stripe, as the stub of chapter 5 answers it: one refund per charge, whatever the retries.
      const stripeCalls: string[] = [];
      const payments: TutorialPayments = {
        async refund(chargeId, amountCents, { idempotencyKey }) {
          stripeCalls.push(`${idempotencyKey} ${chargeId} ${amountCents}`);
          return { id: `re_${chargeId}` };
        },
      };
      const worker = createWorker({
        store,
        workflows: [refundRegistration(payments), ...waitingWorkflows],
        pollIntervalMs: 20,
        reconcileIntervalMs: 0,
      });
      await worker.start();
      const client = createClient({ store });
      const settled = async (runId: string) =>
        client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
      const waiting = (runId: string) =>
        waitUntil(`run ${runId} to wait`, async () => {
          const run = await client.getRun(runId);
          return run.status === 'waiting' ? run : undefined;
        });
      try {
        // The webhook comes before the checkout run waits, and comes twice: kept, stored once, taken once.
        await onPaymentSettled(store, { id: 'evt_1', orderId: 'o-2', chargeId: 'ch_2' });
        await onPaymentSettled(store, { id: 'evt_1', orderId: 'o-2', chargeId: 'ch_2' });
        const paid = await settled((await client.start(checkout, { orderId: 'o-2' })).runId);
        expect(paid.output).toEqual({
          settled: expect.objectContaining({ status: 'received' }),
          recordPayment: { chargeId: 'ch_2' },
        });
        expect(paid.steps.map((s) => [s.step_name, s.skipped])).toEqual([
          ['settled', false],
          ['recordPayment', false],
          ['cancelOrder', true],
        ]);

        // A signal approves; the refund runs as a child.
        const approval = await desk.askForApproval(store, 'o-1', 1200);
        expect((await waiting(approval)).waiting_for).toMatchObject({
          kind: 'event',
          step: 'approval',
          event: 'refund.approved',
          key: approval,
        });
        await desk.approve(store, approval, 'ops@example.com');
        expect(await settled(approval)).toMatchObject({
          status: 'completed',
          output: {
            approval: { status: 'received', payload: { approvedBy: 'ops@example.com' } },
            refund: { refundId: 're_ch_1' },
          },
          children: [expect.objectContaining({ workflowName: 'refund', step: 'refund', status: 'completed' })],
        });

        // Withdrawn while it waits; and a run whose own deadline passes.
        const withdrawn = await desk.askForApproval(store, 'o-5', 300);
        await waiting(withdrawn);
        expect(await desk.withdraw(store, withdrawn)).toBe(true);
        expect(await desk.withdraw(store, withdrawn)).toBe(false);
        expect((await client.getRun(withdrawn)).status).toBe('cancelled');
        const overdue = await client.start(refundApproval, { orderId: 'o-5', amountCents: 300 }, { timeoutMs: 300 });
        expect(await settled(overdue.runId)).toMatchObject({
          status: 'cancelled',
          error: { name: 'DeadlineExceeded' },
        });

        // A sleep until a time, then a child.
        const refundAt = new Date(Date.now() + 1_000).toISOString();
        const scheduled = await client.start(scheduledRefund, { orderId: 'o-2', amountCents: 500, refundAt });
        expect((await waiting(scheduled.runId)).waiting_for).toEqual({
          kind: 'sleep',
          step: 'untilDue',
          until: refundAt,
        });
        expect(await settled(scheduled.runId)).toMatchObject({
          status: 'completed',
          output: { untilDue: { until: refundAt }, refund: { refundId: 're_ch_2' } },
        });

        // A fan-out, its outputs in item order.
        const orders = [
          { orderId: 'o-3', amountCents: 100 },
          { orderId: 'o-4', amountCents: 200 },
        ];
        const recall = await settled((await client.start(refundRecall, { recall: 'recall-7', orders })).runId);
        expect(recall.output).toEqual({ refunds: [{ refundId: 're_ch_3' }, { refundId: 're_ch_4' }] });
        expect(recall.children.map((c) => [c.index, c.status])).toEqual([
          [0, 'completed'],
          [1, 'completed'],
        ]);

        expect(stripeCalls.sort()).toEqual([
          'refund:o-1 ch_1 1200',
          'refund:o-2 ch_2 500',
          'refund:o-3 ch_3 100',
          'refund:o-4 ch_4 200',
        ]);
      } finally {
        await worker.stop();
      }
    } finally {
      await store.close();
    }
  }, 90_000);

  it('the debounced starts and the dedupe policy of tutorial chapter 5 do what the text says (embedded PGlite, in process)', async () => {
    const dir = scratchDir('debounce');
    writeFiles(
      dir,
      withDirective('file').map((b) => ({ path: b.directive!.argument, content: b.content })),
    );
    const codegen = await runCli(['codegen', '--root', dir]);
    expect(codegen.code, codegen.stdout + codegen.stderr).toBe(0);
    const store = await createPGliteTestStore();
    try {
      await migrate(store, { sources: [join(dir, 'generated/migrations'), join(dir, 'db/migrations')] });
      const { correctRefund, requestRefundOnce } = (await import(join(dir, 'src/refund-corrections.ts'))) as {
        correctRefund(store: Store, orderId: string, amountCents: number): Promise<string>;
        requestRefundOnce(store: Store, orderId: string, amountCents: number): Promise<string>;
      };
      const client = createClient({ store });
      // Three corrections, one run: the last amount, due a minute after the last correction.
      const runId = await correctRefund(store, 'o-1', 1200);
      expect(await correctRefund(store, 'o-1', 1000)).toBe(runId);
      expect(await correctRefund(store, 'o-1', 900)).toBe(runId);
      const run = await client.getRun(runId);
      expect(run).toMatchObject({
        status: 'pending',
        input: { orderId: 'o-1', amountCents: 900 },
        debounce_key: 'refund:o-1',
      });
      expect(run.run_after.getTime() - run.updated_at.getTime()).toBe(60_000);
      // A retry with another amount gets the first request's run back.
      const once = await requestRefundOnce(store, 'o-2', 500);
      expect(await requestRefundOnce(store, 'o-2', 400)).toBe(once);
      expect((await client.getRun(once)).input).toEqual({ orderId: 'o-2', amountCents: 500 });
    } finally {
      await store.close();
    }
  }, 60_000);
  it('the nightly schedule of tutorial chapter 8 registers as written and starts one run for the latest night no worker ran (embedded PGlite, in process)', async () => {
    const dir = scratchDir('schedules');
    writeFiles(
      dir,
      withDirective('file').map((b) => ({ path: b.directive!.argument, content: b.content })),
    );
    writeFiles(dir, [
      {
        path: 'db/migrations/0002_test_data.sql',
        content:
          "INSERT INTO shop.\"order\" (id) VALUES ('o-1'), ('o-2');\nINSERT INTO shop.refund VALUES ('o-1', 're_1', 1200), ('o-2', 're_2', 300);",
      },
    ]);
    const codegen = await runCli(['codegen', '--root', dir]);
    expect(codegen.code, codegen.stdout + codegen.stderr).toBe(0);
    const store = await createPGliteTestStore();
    try {
      await migrate(store, { sources: [join(dir, 'generated/migrations'), join(dir, 'db/migrations')] });
      const nightly = (await import(join(dir, 'src/nightly.ts'))) as {
        workflows: WorkflowRegistration[];
        schedules: AnySchedule[];
      };
      const worker = createWorker({
        store,
        ...nightly,
        scheduleIntervalMs: 50,
        pollIntervalMs: 20,
        reconcileIntervalMs: 0,
      });
      await worker.start();
      const client = createClient({ store });
      try {
        const [registered] = await client.listSchedules();
        expect(registered).toMatchObject({
          name: 'nightly-refund-report',
          cron: '0 2 * * *',
          timezone: 'Europe/Berlin',
          catchUp: 'latest',
          paused: false,
          lastRunId: null,
        });
        const next = registered!.nextTicks[0]!;
        const berlin = new Intl.DateTimeFormat('en-GB', {
          timeZone: 'Europe/Berlin',
          hour: '2-digit',
          minute: '2-digit',
        });
        expect(berlin.format(next)).toBe('02:00');

        // No worker ran for three nights: 'latest' starts the last of them, once.
        await store.db
          .updateTable('ledgerflow.schedule')
          .set({ next_tick_at: new Date(next.getTime() - 3 * 24 * 3_600_000) })
          .execute();
        const runId = await waitUntil(
          'the run of the latest missed night',
          async () => (await client.listSchedules())[0]!.lastRunId ?? undefined,
        );
        const run = await client.getRun((await client.waitForRun(runId, { timeoutMs: 20_000, pollMs: 20 })).id);
        const [after] = await client.listSchedules();
        const night = after!.lastTickAt!;
        expect(berlin.format(night)).toBe('02:00');
        expect(next.getTime() - night.getTime()).toBeGreaterThanOrEqual(23 * 3_600_000);
        expect(next.getTime() - night.getTime()).toBeLessThanOrEqual(25 * 3_600_000);
        expect(run).toMatchObject({
          status: 'completed',
          dedupe_key: `schedule:nightly-refund-report:${night.toISOString()}`,
          input: { night: night.toISOString().slice(0, 10) },
          output: { total: { refunds: 2, cents: 1500 } },
        });
        expect(after!.nextTicks[0]).toEqual(next);
        expect(await client.listRuns({ workflow: 'refund-report' })).toHaveLength(1);

        expect(await client.pauseSchedule('nightly-refund-report')).toBe(true);
        expect(await client.resumeSchedule('nightly-refund-report')).toBe(true);
        expect((await client.listSchedules())[0]).toMatchObject({
          paused: false,
          nextTicks: [next, expect.any(Date), expect.any(Date)],
        });
      } finally {
        await worker.stop();
      }
    } finally {
      await store.close();
    }
  }, 60_000);
  it('the queues of tutorial chapter 9 hold as written: two runs per merchant, the urgent refund next in line (embedded PGlite, in process)', async () => {
    const dir = scratchDir('queues');
    writeFiles(
      dir,
      withDirective('file').map((b) => ({ path: b.directive!.argument, content: b.content })),
    );
    const request = (orderId: string, amountCents: number) => ({ orderId, chargeId: `ch_${orderId}`, amountCents });
    const big = Array.from({ length: 8 }, (_, i) => request(`big-${i}`, 100 + i));
    const small = [request('small-0', 50), request('small-1', 60)];
    const urgent = request('big-urgent', 999);
    const orders = [...big, ...small, urgent];
    writeFiles(dir, [
      {
        path: 'db/migrations/0002_test_data.sql',
        content: `INSERT INTO shop."order" (id) VALUES ${orders.map((o) => `('${o.orderId}')`).join(', ')};`,
      },
    ]);
    const codegen = await runCli(['codegen', '--root', dir]);
    expect(codegen.code, codegen.stdout + codegen.stderr).toBe(0);
    const store = await createPGliteTestStore();
    try {
      await migrate(store, { sources: [join(dir, 'generated/migrations'), join(dir, 'db/migrations')] });
      const load = async <T>(path: string): Promise<T> => (await import(join(dir, path))) as T;
      const { merchantRefundRegistration } = await load<{
        merchantRefundRegistration(payments: TutorialPayments): WorkflowRegistration;
      }>('src/merchant-refund.handlers.ts');
      type Request = (typeof orders)[number];
      const requests = await load<{
        uploadRefunds(store: Store, merchantId: string, requests: readonly Request[]): Promise<void>;
        refundNow(store: Store, merchantId: string, request: Request): Promise<string>;
      }>('src/merchant-refund-requests.ts');

      // Stripe: every call waits until the test has looked at the line; counts calls in progress per merchant.
      let open!: () => void;
      const gate = new Promise<void>((resolve) => (open = resolve));
      const merchantOf = (chargeId: string) => (chargeId.startsWith('ch_big') ? 'm-big' : 'm-small');
      const active = new Map<string, number>();
      const most = new Map<string, number>();
      const calls: string[] = [];
      const payments: TutorialPayments = {
        async refund(chargeId) {
          const merchant = merchantOf(chargeId);
          active.set(merchant, (active.get(merchant) ?? 0) + 1);
          most.set(merchant, Math.max(most.get(merchant) ?? 0, active.get(merchant)!));
          calls.push(chargeId);
          await gate;
          await new Promise((resolve) => setTimeout(resolve, 10));
          active.set(merchant, active.get(merchant)! - 1);
          return { id: `re_${chargeId}` };
        },
      };

      await requests.uploadRefunds(store, 'm-big', big);
      await requests.uploadRefunds(store, 'm-small', small);
      const urgentRun = await requests.refundNow(store, 'm-big', urgent);
      const worker = createWorker({
        store,
        workflows: [merchantRefundRegistration(payments)],
        concurrency: 16,
        pollIntervalMs: 20,
        reconcileIntervalMs: 0,
      });
      await worker.start();
      const client = createClient({ store });
      try {
        // Two runs per merchant hold slots; the rest of m-big's are in line, the urgent one first.
        const [merchants] = await waitUntil('the merchants in line', async () => {
          const listed = await client.listQueues({ queue: 'merchant-refunds', partitions: true });
          return listed[0]?.inFlight === 4 && listed[0].waiting === 7 ? listed : undefined;
        });
        expect(merchants).toMatchObject({
          limits: { concurrency: 10, partition: { concurrency: 2 } },
          partitionsWaiting: 1,
        });
        expect(merchants!.partitions).toEqual([
          expect.objectContaining({ partition: 'm-big', inFlight: 2, waiting: 7, topPriority: 10 }),
          expect.objectContaining({ partition: 'm-small', inFlight: 2, waiting: 0 }),
        ]);
        const urgentWaits = await client.getRun(urgentRun);
        expect(urgentWaits).toMatchObject({
          status: 'waiting',
          lease_owner: null,
          waiting_for: { kind: 'queue', queue: 'merchant-refunds', partition: 'm-big' },
        });
        const [stripe] = await client.listQueues({ queue: 'stripe-api' });
        expect(stripe).toMatchObject({
          limits: { rateLimit: { limit: 100, periodMs: 1_000 } },
          inFlight: 4,
          waiting: 0,
        });

        open();
        await worker.drain({ timeoutMs: 30_000 });
        // The first two of m-big's calls were under way while the urgent refund waited: it went next.
        expect(calls.filter((c) => merchantOf(c) === 'm-big').indexOf(urgent.chargeId)).toBe(2);
        expect([...calls].sort()).toEqual(orders.map((o) => o.chargeId).sort());
        expect(Object.fromEntries(most)).toEqual({ 'm-big': 2, 'm-small': 2 });
        expect((await client.listRuns({ workflow: 'merchant-refund', status: 'completed', limit: 100 })).length).toBe(
          orders.length,
        );
        for (const queue of await client.listQueues()) expect(queue).toMatchObject({ inFlight: 0, waiting: 0 });
      } finally {
        await worker.stop();
      }
    } finally {
      await store.close();
    }
  }, 60_000);
  it('the test file of docs/testing.md passes under vitest, as a user runs it (crash, take-over, time jump)', async () => {
    const dir = scratchDir('testing-kit');
    writeFiles(
      dir,
      withDirective('file').map((b) => ({ path: b.directive!.argument, content: b.content })),
    );
    const codegen = await runCli(['codegen', '--root', dir]);
    expect(codegen.code, codegen.stdout + codegen.stderr).toBe(0);
    // The scratch project's ledgerflow is the repository, which runs from its sources (package.json exports).
    writeFileSync(
      join(dir, 'vitest.config.ts'),
      "import { defaultServerConditions } from 'vite';\n" +
        "const conditions = ['ledgerflow-source', ...defaultServerConditions];\n" +
        "export default { resolve: { conditions }, ssr: { resolve: { conditions } }, test: { include: ['test/**/*.test.ts'] } };\n",
    );
    const vitest = join(root, 'node_modules/vitest/vitest.mjs');
    const { FORCE_COLOR: _color, ...inherited } = process.env;
    const env = { ...inherited, NO_COLOR: '1' };
    const result = await run(process.execPath, [vitest, 'run', '--root', dir, '--reporter', 'verbose'], {
      cwd: dir,
      env,
    }).then(
      ({ stdout }) => ({ code: 0, stdout }),
      (error: { code?: number; stdout?: string; stderr?: string }) => ({
        code: error.code ?? 1,
        stdout: `${error.stdout ?? ''}${error.stderr ?? ''}`,
      }),
    );
    expect(result.code, result.stdout).toBe(0);
    expect(result.stdout).toMatch(/refunds once when the worker dies after Stripe answered/);
    expect(result.stdout).toMatch(/Tests\s+2 passed/);
  }, 120_000);
});

/** The tutorial's PaymentsApi (src/refund.handlers.ts). */
interface TutorialPayments {
  refund(
    chargeId: string,
    amountCents: number,
    options: { idempotencyKey: string; signal: AbortSignal },
  ): Promise<{ id: string }>;
}
