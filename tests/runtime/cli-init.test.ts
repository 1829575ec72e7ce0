import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkTsconfig, type TsconfigSettings } from '../../runtime/cli/init-tsconfig.js';
import { outcomeOf } from '../support/run-cli.js';

/**
 * `ledgerflow init` in a fresh project, then the next steps it prints, run as printed.
 *
 * The scratch project is what `npm install ledgerflow zod` would leave, minus the copying:
 * node_modules/ledgerflow is a symlink to this repository (ledgerflow ships its .ts sources and
 * runs them through tsx), node_modules/.bin/ledgerflow links its bin as npm does, and the
 * packages the project itself imports (zod; tsx for src/worker.ts; @types/node for tsc) are
 * symlinks into this repository's node_modules. ledgerflow's own imports (kysely, pg, PGlite…)
 * resolve from the symlink's real path, i.e. from this repository, as ESM resolution follows
 * symlinks. NODE_PATH would not do: ESM resolution ignores it.
 */

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const DEPENDENCIES = join(REPO, 'node_modules');

interface Outcome {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

let project: string;

/**
 * A shell command line in the project, as a user types it; embedded PGlite (no DATABASE_URL).
 * `npx ledgerflow` runs node_modules/.bin/ledgerflow, which is what npx resolves it to: the first
 * init goes through npx itself, the rest call the bin directly, saving npm's start-up (~2 s a
 * command on two cores) and letting SIGTERM reach the worker rather than npx.
 */
function sh(line: string, { viaNpx = false } = {}): Promise<Outcome> {
  return outcomeOf(spawn('sh', ['-c', viaNpx ? line : withoutNpx(line)], { cwd: project, env: { ...process.env, DATABASE_URL: '' }, stdio: ['ignore', 'pipe', 'pipe'] }));
}

/**
 * Starts a long-running command line in its own process group, waits until its stdout matches
 * `until`, then sends SIGTERM to the group (npx and the node process it started) and returns
 * how it exited.
 */
function runUntil(line: string, until: RegExp, timeoutMs = 30_000): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', `exec ${withoutNpx(line)}`], {
      cwd: project,
      env: { ...process.env, DATABASE_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let stdout = '';
    let stderr = '';
    let signalled = false;
    const stop = (): void => {
      if (signalled) return;
      signalled = true;
      process.kill(-child.pid!, 'SIGTERM');
    };
    const timer = setTimeout(stop, timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (until.test(stdout)) stop();
    });
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    });
  });
}

function withoutNpx(line: string): string {
  return line.replace(/^npx ledgerflow /, 'node_modules/.bin/ledgerflow ');
}

function link(target: string, at: string): void {
  mkdirSync(join(project, at, '..'), { recursive: true });
  symlinkSync(target, join(project, at));
}

/** Every file under the project but node_modules and the database, with its content. */
function snapshot(): Record<string, string> {
  const files: Record<string, string> = {};
  for (const entry of readdirSync(project, { recursive: true, withFileTypes: true })) {
    const file = join(entry.parentPath, entry.name).slice(project.length + 1);
    if (entry.isFile() && !/^(node_modules|\.ledgerflow)\//.test(file)) files[file] = readFileSync(join(project, file), 'utf8');
  }
  return files;
}

const USER_CI = 'name: my-own-ci\non: push\n';
const USER_TSCONFIG = `{
  // The project's own settings, with comments: init checks them (through "extends" too) and never edits them.
  "extends": "./tsconfig.base.json",
  "compilerOptions": { "strict": true, "skipLibCheck": true, "noEmit": true },
}
`;

beforeAll(() => {
  project = mkdtempSync(join(tmpdir(), 'ledgerflow-init-'));
  writeFileSync(
    join(project, 'package.json'),
    `${JSON.stringify({ name: 'shop', private: true, type: 'module', dependencies: { ledgerflow: '0.1.0', zod: '^4.0.0' } }, null, 2)}\n`,
  );
  writeFileSync(join(project, 'tsconfig.json'), USER_TSCONFIG);
  writeFileSync(join(project, 'tsconfig.base.json'), JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext' } }));
  mkdirSync(join(project, '.github/workflows'), { recursive: true });
  writeFileSync(join(project, '.github/workflows/ledgerflow.yml'), USER_CI);
  link(REPO, 'node_modules/ledgerflow');
  link('../ledgerflow/bin/ledgerflow.js', 'node_modules/.bin/ledgerflow');
  for (const name of ['zod', 'tsx', '@types/node']) link(join(DEPENDENCIES, name), `node_modules/${name}`);
});

afterAll(() => {
  rmSync(project, { recursive: true, force: true });
});

describe('ledgerflow init', () => {
  const steps: string[] = [];

  it('writes the scaffold, keeps an existing file and checks the tsconfig it does not touch', async () => {
    const result = await sh('npx ledgerflow init', { viaNpx: true });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(
      [
        'created  src/workflows/hello.workflow.ts',
        'created  src/workflows/hello.handlers.ts',
        'created  src/workflows/index.ts',
        'created  src/worker.ts',
        'created  db/migrations/0001_hello_greeting.sql',
        'skipped  .github/workflows/ledgerflow.yml (exists; left as it is)',
      ].join('\n'),
    );
    expect(result.stdout).toContain('tsconfig.json has the settings ledgerflow needs.');
    expect(readFileSync(join(project, '.github/workflows/ledgerflow.yml'), 'utf8')).toBe(USER_CI);
    expect(readFileSync(join(project, 'tsconfig.json'), 'utf8')).toBe(USER_TSCONFIG);
    expect(readFileSync(join(project, 'src/workflows/hello.handlers.ts'), 'utf8')).toContain(
      "from '../../generated/contracts/hello.v1.js'",
    );
    expect(readFileSync(join(project, 'src/worker.ts'), 'utf8')).toContain("from './workflows/index.js'");
    steps.push(...result.stdout.split('\n').filter((line) => line.startsWith('  npx ')).map((line) => line.trim()));
    expect(steps).toEqual([
      'npx ledgerflow codegen',
      'npx ledgerflow migrate --dir generated/migrations --dir db/migrations',
      `npx ledgerflow start hello --input '{"name":"world"}'`,
      'npx ledgerflow worker --workflows src/workflows/index.ts',
    ]);
  });

  it('a second init overwrites nothing and lists every file as skipped', async () => {
    const before = snapshot();
    const result = await sh('npx ledgerflow init --json');
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout) as { created: string[]; skipped: string[] };
    expect(report.created).toEqual([]);
    expect(report.skipped).toHaveLength(6);
    expect(snapshot()).toEqual(before);
  });

  // Four CLI processes, the worker's among them running codegen in memory to compare with the contract.
  it('the printed steps work as printed: codegen, migrate, start, worker; the run completes', async () => {
    const [codegen, migrate, start, worker] = steps as [string, string, string, string];
    const generated = await sh(codegen);
    expect(generated.code, generated.stdout + generated.stderr).toBe(0);
    expect(readdirSync(join(project, 'generated/migrations'))).toEqual(['0002_hello_v1.sql']);

    const migrated = await sh(migrate);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(migrated.stdout).toContain('applied  0001_hello_greeting.sql');
    expect(migrated.stdout).toContain('applied  0002_hello_v1.sql');

    const started = await sh(start);
    expect(started.code, started.stderr).toBe(0);
    const runId = /Started run ([0-9a-f-]{36}) \(hello v1\)/.exec(started.stdout)?.[1];
    expect(runId, started.stdout).toBeDefined();

    const worked = await runUntil(worker, new RegExp(`run-completed runId=${runId}`));
    expect(worked.stdout, worked.stderr).toMatch(new RegExp(`run-completed runId=${runId}`));
    expect(worked.code).toBe(0);

    const shown = await sh(`npx ledgerflow run ${runId} --json`);
    const run = JSON.parse(shown.stdout) as { status: string; output: unknown };
    expect(run.status).toBe('completed');
  }, 120_000);

  it('the worker module runs a second run to completion, and the scaffold type-checks', async () => {
    const started = await sh(`npx ledgerflow start hello --input '{"name":"ada"}' --json`);
    const { runId } = JSON.parse(started.stdout) as { runId: string };
    const worked = await runUntil('node --import tsx src/worker.ts', new RegExp(`run-completed ${runId}`));
    expect(worked.stdout, worked.stderr).toContain(`run-completed ${runId}`);
    expect(worked.code).toBe(0);

    const shown = await sh(`npx ledgerflow run ${runId} --json`);
    expect((JSON.parse(shown.stdout) as { status: string }).status).toBe('completed');

    // node_modules/ledgerflow is the repository: its types are its sources (the package's own
    // dist/ is covered by tests/package/pack-install.test.ts).
    const typecheck = await sh(`${join(DEPENDENCIES, '.bin/tsc')} -p tsconfig.json --customConditions ledgerflow-source`);
    expect(typecheck.stdout + typecheck.stderr).toBe('');
    expect(typecheck.code).toBe(0);

    const check = await sh('npx ledgerflow codegen --check');
    expect(check.code, check.stdout).toBe(0);
  });

  it('with --dir, in a CommonJS project: prints what to set in tsconfig.json and package.json, edits neither', async () => {
    const other = join(project, 'other');
    mkdirSync(other);
    const manifest = '{ "name": "legacy" }\n';
    const tsconfig = '{ "compilerOptions": { "module": "commonjs", "strict": true } }\n';
    writeFileSync(join(other, 'package.json'), manifest);
    writeFileSync(join(other, 'tsconfig.json'), tsconfig);
    const result = await sh('cd other && ../node_modules/.bin/ledgerflow init --dir lib/flows');
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('created  lib/flows/hello.workflow.ts\n');
    expect(result.stdout).toContain('created  lib/worker.ts\n');
    expect(readFileSync(join(other, 'lib/worker.ts'), 'utf8')).toContain("from './flows/index.js'");
    expect(readFileSync(join(other, 'lib/flows/hello.handlers.ts'), 'utf8')).toContain("from '../../generated/contracts/hello.v1.js'");
    expect(result.stdout).toMatch(/"module": "NodeNext",\s+now "commonjs"/);
    expect(result.stdout).toMatch(/"target": "ES2022",\s+now not set/);
    expect(result.stdout).not.toContain('skipLibCheck');
    expect(result.stdout).not.toContain('"strict": true,');
    expect(result.stdout).toContain('package.json is left as it is. Set:\n  "type": "module"');
    expect(result.stdout).toContain('  npm install ledgerflow zod\n  npx ledgerflow codegen\n');
    expect(result.stdout).toContain('  npx ledgerflow worker --workflows lib/flows/index.ts\n');
    expect(readFileSync(join(other, 'package.json'), 'utf8')).toBe(manifest);
    expect(readFileSync(join(other, 'tsconfig.json'), 'utf8')).toBe(tsconfig);
  });

  it('writes a tsconfig.json where there is none', async () => {
    const fresh = join(project, 'fresh');
    mkdirSync(fresh);
    writeFileSync(join(fresh, 'package.json'), '{ "type": "module" }\n');
    const result = await sh('cd fresh && ../node_modules/.bin/ledgerflow init --json');
    expect(result.code, result.stderr).toBe(0);
    expect((JSON.parse(result.stdout) as { created: string[] }).created).toContain('tsconfig.json');
    expect(JSON.parse(readFileSync(join(fresh, 'tsconfig.json'), 'utf8'))).toMatchObject({
      compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, types: ['node'] },
    });
  });

  it('refuses a --dir outside the project and a directory without package.json', async () => {
    const outside = await sh('npx ledgerflow init --dir ../elsewhere');
    expect(outside.code).toBe(2);
    expect(outside.stderr).toContain('--dir ../elsewhere must be a directory inside the project');
    const bare = await sh('cd src && npx ledgerflow init');
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('No package.json in');
  });
});

describe('checkTsconfig', () => {
  const suitable: TsconfigSettings = {
    module: 'nodenext',
    moduleResolution: undefined,
    target: 'es2022',
    lib: undefined,
    strict: true,
  };

  it('accepts NodeNext, and ESNext with bundler resolution', () => {
    expect(checkTsconfig(suitable)).toEqual([]);
    expect(checkTsconfig({ ...suitable, module: 'esnext', moduleResolution: 'bundler', target: 'esnext', lib: ['es2023', 'dom'] })).toEqual([]);
  });

  it('names each setting to change, with what it is now', () => {
    const fixes = checkTsconfig({
      module: 'commonjs',
      moduleResolution: 'node10',
      target: 'es2017',
      lib: ['es2017', 'dom'],
      strict: false,
    });
    expect(fixes.map((f) => [f.line, f.now])).toEqual([
      ['"module": "NodeNext"', '"commonjs"'],
      ['"moduleResolution": "NodeNext"', '"node10"'],
      ['"target": "ES2022"', '"es2017"'],
      ['"lib": ["es2017","dom","ES2022"]', '["es2017","dom"]'],
      ['"strict": true', 'false'],
    ]);
  });
});
