import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZOD_PEER_RANGE } from '../../dsl/peer-dependencies.js';
import { ok, run } from './app-process.js';

/**
 * The package as npm ships it: `npm pack` (which builds through the prepack script), and a scratch application in a temp
 * directory that installs the tarball and zod at the lowest version of the peer range, with no
 * tsx and no TypeScript of its own (it borrows the repository's tsc binary to compile). It runs
 * the CLI on plain node, compiles the application under three strict tsconfigs that check
 * ledgerflow's declarations (skipLibCheck off), and runs a workflow to completion from each build.
 * Run with `npm run test:package` (not part of `npm test`).
 */
const REPO = fileURLToPath(new URL('../..', import.meta.url));
const TSC = join(REPO, 'node_modules/typescript/bin/tsc');
const ZOD_FLOOR = ZOD_PEER_RANGE.atLeast;

let work: string;
let app: string;

function write(path: string, content: string): void {
  mkdirSync(dirname(join(app, path)), { recursive: true });
  writeFileSync(join(app, path), content);
}

const WORKFLOW = `import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const greet = workflow('greet', { version: 1, input: z.object({ name: z.string().min(1) }) })
  .step('compose', { output: z.object({ message: z.string() }) })
  .transactional('record', {
    output: z.object({ message: z.string() }),
    key: ({ input }) => \`greet:\${input.name}\`,
  });
`;

const HANDLERS = `import type { WorkflowRegistration } from 'ledgerflow/runtime';
import { greetHandlers } from '../generated/contracts/greet.v1.js';
import type { greet } from './greet.workflow.js';

export function greetRegistration(): WorkflowRegistration<typeof greet> {
  return greetHandlers({
    compose: async ({ input }) => ({ message: \`Hello, \${input.name}!\` }),
    record: async (ctx) => ctx.record({ message: ctx.steps.compose.message }),
  });
}
`;

// One run to completion on the embedded PGlite that \`ledgerflow migrate\` migrated; prints its
// status, output and ledger.
const MAIN = `import { createClient, createWorker, openStore } from 'ledgerflow/runtime';
import { greetRegistration } from './greet.handlers.js';

const name = process.argv[2] ?? 'nobody';
const store = await openStore();
const workflows = [greetRegistration()];
const client = createClient({ store, workflows });
const worker = createWorker({ store, workflows });
try {
  const { runId } = await client.start('greet', { name });
  await worker.drain({ timeoutMs: 30_000 });
  const run = await client.getRun(runId);
  const effects = await client.listEffects({ runId });
  console.log(JSON.stringify({
    status: run.status,
    output: run.output,
    effects: effects.map((e) => ({ step: e.step_name, key: e.idempotency_key, status: e.status })),
  }));
} finally {
  await worker.stop();
  await store.close();
}
`;

// Every entry point's declarations in the program, so each strict tsc checks all of them: each
// `exports` entry of package.json that has types.
const TYPED_ENTRIES = Object.entries(
  (
    JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
      exports: Record<string, string | { types?: string }>;
    }
  ).exports,
)
  .filter(([, target]) => typeof target === 'object' && target.types !== undefined)
  .map(([subpath]) => `ledgerflow${subpath.slice(1)}`);
const ENTRIES = `${TYPED_ENTRIES.map((entry, i) => `import type * as entry${i} from '${entry}';`).join('\n')}

export type Entries = [${TYPED_ENTRIES.map((_, i) => `typeof entry${i}`).join(', ')}];
`;

const STRICT = { strict: true, skipLibCheck: false, types: ['node'], rootDir: '.' };
const CONFIGS = {
  nodenext: {
    ...STRICT,
    target: 'ES2023',
    lib: ['ES2023'],
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    exactOptionalPropertyTypes: true,
    noUncheckedIndexedAccess: true,
  },
  bundler: {
    ...STRICT,
    target: 'ES2022',
    lib: ['ES2023'],
    module: 'preserve',
    moduleResolution: 'bundler',
    verbatimModuleSyntax: true,
  },
  'node16-es2022': {
    ...STRICT,
    target: 'ES2022',
    lib: ['ES2022'],
    module: 'Node16',
    moduleResolution: 'Node16',
    noPropertyAccessFromIndexSignature: true,
  },
} as const;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'ledgerflow-pack-'));
  // `npm pack` builds first (the prepack script), as `npm publish` does.
  const packed = JSON.parse(await ok('npm', ['pack', '--json', '--silent', '--pack-destination', work], REPO)) as [
    { filename: string; files: { path: string }[] },
  ];
  const shipped = packed[0].files.map((f) => f.path);
  expect(shipped).toContain('dist/runtime/index.js');
  expect(shipped).toContain('dist/runtime/migrate/core/0001_core.sql');
  expect(
    shipped.filter((path) => path.endsWith('.ts') && !path.endsWith('.d.ts')),
    'no TypeScript sources in the tarball',
  ).toEqual([]);

  app = join(work, 'app');
  mkdirSync(app);
  write('package.json', `${JSON.stringify({ name: 'pack-app', private: true, type: 'module' }, null, 2)}\n`);
  await ok(
    'npm',
    [
      'install',
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      join(work, packed[0].filename),
      `zod@${ZOD_FLOOR}`,
      '@types/node@20.19.43',
    ],
    app,
  );
  write('src/greet.workflow.ts', WORKFLOW);
  write('src/greet.handlers.ts', HANDLERS);
  write('src/main.ts', MAIN);
  write('src/entries.ts', ENTRIES);
}, 300_000);

afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe('the packed package, installed in an application', () => {
  it('installs without tsx or TypeScript, and its CLI runs codegen and migrate on plain node', async () => {
    for (const absent of ['tsx', 'typescript'])
      expect(existsSync(join(app, 'node_modules', absent)), absent).toBe(false);
    expect(JSON.parse(readFileSync(join(app, 'node_modules/zod/package.json'), 'utf8')).version).toBe(ZOD_FLOOR);

    const codegen = await ok('npx', ['--no-install', 'ledgerflow', 'codegen'], app);
    expect(codegen).toContain('1 workflow version(s) in 1 file(s), 0 error(s)');
    expect(existsSync(join(app, 'generated/contracts/greet.v1.ts'))).toBe(true);

    const migrate = await ok('npx', ['--no-install', 'ledgerflow', 'migrate'], app);
    expect(migrate).toMatch(/applied {2}core\/0001_core\.sql/);
    expect(migrate).toMatch(/applied {2}0002_greet_v1\.sql/);
  });

  it.each(Object.entries(CONFIGS))(
    'compiles strictly under %s and runs a workflow to completion with node',
    async (config, options) => {
      write(
        `tsconfig.${config}.json`,
        JSON.stringify({ compilerOptions: { ...options, outDir: `out-${config}` }, include: ['src', 'generated'] }),
      );
      const tsc = await run(process.execPath, [TSC, '-p', `tsconfig.${config}.json`], app);
      expect(tsc.stdout + tsc.stderr, `tsc under ${config}`).toBe('');
      expect(tsc.code).toBe(0);

      const name = `ada-${config}`;
      const printed = await ok(process.execPath, [`out-${config}/src/main.js`, name], app);
      expect(JSON.parse(printed.trim().split('\n').at(-1)!)).toEqual({
        status: 'completed',
        output: { compose: { message: `Hello, ${name}!` }, record: { message: `Hello, ${name}!` } },
        effects: [{ step: 'record', key: `greet:${name}`, status: 'recorded' }],
      });
    },
  );

  it('loads every entry point on plain node', async () => {
    const script = `for (const entry of ${JSON.stringify(TYPED_ENTRIES)}) console.log(entry, Object.keys(await import(entry)).length > 0);`;
    const printed = await ok(process.execPath, ['--input-type=module', '-e', script], app);
    expect(printed.trim().split('\n')).toEqual(TYPED_ENTRIES.map((entry) => `${entry} true`));
  });

  it('a .ts --workflows module needs tsx, an optional peer: the CLI says so', async () => {
    const start = await run('npx', ['--no-install', 'ledgerflow', 'start', 'greet', '--input', '{"name":"x"}'], app);
    expect(start.code).toBe(2);
    expect(start.stderr).toContain('--workflows generated/index.ts is TypeScript, which ledgerflow loads through tsx');
    expect(start.stderr).toContain('npm install --save-dev tsx');
  });

  it('the tsserver plugin loads from the installed package with require()', async () => {
    const loaded = await ok(
      process.execPath,
      ['-e', "process.stdout.write(typeof require('ledgerflow/ts-plugin'))"],
      app,
    );
    expect(loaded).toBe('function');
  });

  it('with zod outside the peer range, the CLI and the library refuse to start and say how to fix it', async () => {
    // The check reads the version from zod's package.json: relabelling the installed copy is
    // enough to prove that it runs on load, without a second install.
    const manifestPath = join(app, 'node_modules/zod/package.json');
    const manifest = readFileSync(manifestPath, 'utf8');
    writeFileSync(manifestPath, manifest.replace(`"version": "${ZOD_FLOOR}"`, '"version": "3.23.8"'));
    try {
      const message = 'ledgerflow needs zod >=4.0.0 <5 (peer dependency); found 3.23.8. Run: npm install zod@^4';
      const cli = await run('npx', ['--no-install', 'ledgerflow', 'migrate'], app);
      expect(cli.code).toBe(1);
      expect(cli.stderr.trim()).toBe(message);
      const library = await run(process.execPath, ['out-nodenext/src/main.js', 'never'], app);
      expect(library.code).not.toBe(0);
      expect(library.stderr).toContain(`PeerDependencyError: ${message}`);
    } finally {
      writeFileSync(manifestPath, manifest);
    }
  });
});
