import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { preparePackageJson } from '../../runtime/cli/init-package-json.js';
import { checkTsconfig, type TsconfigSettings } from '../../runtime/cli/init-tsconfig.js';
import { outcomeOf, runUntil as runUntilMatch } from '../support/run-cli.js';

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
  return outcomeOf(
    spawn('sh', ['-c', viaNpx ? line : withoutNpx(line)], {
      cwd: project,
      env: { ...process.env, DATABASE_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
}

/** A long-running command line as a user types it, stopped with SIGTERM once its stdout matches `until`. */
function runUntil(line: string, until: RegExp, timeoutMs = 30_000): Promise<Outcome> {
  return runUntilMatch(withoutNpx(line), { cwd: project, env: { ...process.env, DATABASE_URL: '' }, until, timeoutMs });
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
    if (entry.isFile() && !/^(node_modules|\.ledgerflow)\//.test(file))
      files[file] = readFileSync(join(project, file), 'utf8');
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
    `${JSON.stringify({ name: 'shop', private: true, type: 'module', dependencies: { ledgerflow: '0.1.0', zod: '^4.0.0', tsx: '^4.0.0' } }, null, 2)}\n`,
  );
  writeFileSync(join(project, 'tsconfig.json'), USER_TSCONFIG);
  writeFileSync(
    join(project, 'tsconfig.base.json'),
    JSON.stringify({ compilerOptions: { target: 'ES2022', module: 'NodeNext' } }),
  );
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
    steps.push(
      ...result.stdout
        .split('\n')
        .filter((line) => line.startsWith('  npx '))
        .map((line) => line.trim()),
    );
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
    // Five CLI processes and a worker, each a few seconds on a loaded two-core machine.
  }, 180_000);

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
    const typecheck = await sh(
      `${join(DEPENDENCIES, '.bin/tsc')} -p tsconfig.json --customConditions ledgerflow-source`,
    );
    expect(typecheck.stdout + typecheck.stderr).toBe('');
    expect(typecheck.code).toBe(0);

    const check = await sh('npx ledgerflow codegen --check');
    expect(check.code, check.stdout).toBe(0);
  });

  it('with --dir, in a CommonJS project with code of its own: prints what to set in tsconfig.json and package.json, edits neither', async () => {
    const other = join(project, 'other');
    mkdirSync(join(other, 'lib'), { recursive: true });
    const manifest = '{ "name": "legacy" }\n';
    const tsconfig = '{ "compilerOptions": { "module": "commonjs", "strict": true } }\n';
    writeFileSync(join(other, 'package.json'), manifest);
    writeFileSync(join(other, 'tsconfig.json'), tsconfig);
    writeFileSync(join(other, 'lib/legacy.js'), 'module.exports = { legacy: true };\n');
    const result = await sh('cd other && ../node_modules/.bin/ledgerflow init --dir lib/flows');
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('created  lib/flows/hello.workflow.ts\n');
    expect(result.stdout).toContain('created  lib/worker.ts\n');
    expect(readFileSync(join(other, 'lib/worker.ts'), 'utf8')).toContain("from './flows/index.js'");
    expect(readFileSync(join(other, 'lib/flows/hello.handlers.ts'), 'utf8')).toContain(
      "from '../../generated/contracts/hello.v1.js'",
    );
    expect(result.stdout).toMatch(/"module": "NodeNext",\s+now "commonjs"/);
    expect(result.stdout).toMatch(/"target": "ES2022",\s+now not set/);
    expect(result.stdout).not.toContain('skipLibCheck');
    expect(result.stdout).not.toContain('"strict": true,');
    expect(result.stdout).toContain(
      'package.json is left as it is: its "type" is not set (CommonJS), and node loads lib/legacy.js as CommonJS under it.\n',
    );
    // Setting the type is the first step; ledgerflow comes from a tarball, not the registry.
    expect(result.stdout).toContain(
      '  npm pkg set type=module\n  npm install <path to the ledgerflow .tgz> zod tsx\n  npx ledgerflow codegen\n',
    );
    expect(result.stdout).toContain('  npx ledgerflow worker --workflows lib/flows/index.ts\n');
    expect(readFileSync(join(other, 'package.json'), 'utf8')).toBe(manifest);
    expect(readFileSync(join(other, 'tsconfig.json'), 'utf8')).toBe(tsconfig);
  });

  it('in a package as `npm init -y` writes it: sets "type": "module", changing nothing else in package.json', async () => {
    const fresh = join(project, 'from-npm-init');
    mkdirSync(fresh);
    // npm init -y's package.json (npm 11): "main" names a file that does not exist.
    const manifest = {
      name: 'from-npm-init',
      version: '1.0.0',
      description: '',
      main: 'index.js',
      scripts: { test: 'echo "Error: no test specified" && exit 1' },
      keywords: [],
      author: '',
      license: 'ISC',
      type: 'commonjs',
    };
    const before = `${JSON.stringify(manifest, null, 2)}\n`;
    writeFileSync(join(fresh, 'package.json'), before);
    const result = await sh('cd from-npm-init && ../node_modules/.bin/ledgerflow init');
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(
      'edited   package.json: "type": "module" (was "commonjs"; nothing else here relied on CommonJS)\n',
    );
    expect(readFileSync(join(fresh, 'package.json'), 'utf8')).toBe(
      before.replace('"type": "commonjs"', '"type": "module"'),
    );
    expect(result.stdout).not.toContain('npm pkg set');

    // Run again, init's own files (unchanged) are no reason to keep CommonJS either: nothing left to do.
    const again = await sh('cd from-npm-init && ../node_modules/.bin/ledgerflow init --json');
    expect(JSON.parse(again.stdout)).toMatchObject({
      packageJson: { type: 'module', edited: false, commonJsFiles: [] },
    });
  });

  it('writes a tsconfig.json where there is none', async () => {
    const fresh = join(project, 'fresh');
    mkdirSync(fresh);
    writeFileSync(join(fresh, 'package.json'), '{ "type": "module" }\n');
    const result = await sh('cd fresh && ../node_modules/.bin/ledgerflow init --json');
    expect(result.code, result.stderr).toBe(0);
    expect((JSON.parse(result.stdout) as { created: string[] }).created).toContain('tsconfig.json');
    expect(JSON.parse(readFileSync(join(fresh, 'tsconfig.json'), 'utf8'))).toMatchObject({
      compilerOptions: {
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        target: 'ES2022',
        strict: true,
        types: ['node'],
      },
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
    expect(
      checkTsconfig({
        ...suitable,
        module: 'esnext',
        moduleResolution: 'bundler',
        target: 'esnext',
        lib: ['es2023', 'dom'],
      }),
    ).toEqual([]);
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

describe('preparePackageJson', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });
  function packageWith(manifest: string, files: Record<string, string> = {}): string {
    const dir = mkdtempSync(join(tmpdir(), 'ledgerflow-package-json-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'package.json'), manifest);
    for (const [file, content] of Object.entries(files)) {
      mkdirSync(join(dir, file, '..'), { recursive: true });
      writeFileSync(join(dir, file), content);
    }
    return dir;
  }

  it('changes only the top-level "type", in the file\'s own layout, past a nested "type"', () => {
    const manifest =
      '{\r\n\t"name": "x",\r\n\t"repository": { "type": "git", "url": "u" },\r\n\t"type": "commonjs"\r\n}\r\n';
    const dir = packageWith(manifest, {
      'lib/tool.cjs': 'module.exports = 1;\n',
      '.git/hooks/x.js': '',
      'node_modules/a/index.js': '',
    });
    expect(preparePackageJson(dir, new Map())).toMatchObject({ edited: true, isModule: true, typeWas: 'commonjs' });
    expect(readFileSync(join(dir, 'package.json'), 'utf8')).toBe(
      manifest.replace('"type": "commonjs"', '"type": "module"'),
    );
  });

  it('adds the key last when there is none', () => {
    const dir = packageWith('{\n    "name": "x",\n    "private": true\n}\n');
    expect(preparePackageJson(dir, new Map()).edited).toBe(true);
    expect(readFileSync(join(dir, 'package.json'), 'utf8')).toBe(
      '{\n    "name": "x",\n    "private": true,\n    "type": "module"\n}\n',
    );
  });

  it("leaves it when a file of the project may rely on CommonJS (a dot file too), naming the first three; init's own files do not count", () => {
    const manifest = '{ "name": "x" }\n';
    const own = 'export const workflows = [];\n';
    const dir = packageWith(manifest, {
      '.eslintrc.js': '',
      'src/a.ts': '',
      'src/b.tsx': '',
      'src/c.jsx': '',
      'src/workflows/index.ts': own,
    });
    const report = preparePackageJson(dir, new Map([['src/workflows/index.ts', own]]));
    expect(report).toMatchObject({
      edited: false,
      isModule: false,
      commonJsFiles: ['.eslintrc.js', 'src/a.ts', 'src/b.tsx'],
      moreCommonJsFiles: true,
    });
    expect(readFileSync(join(dir, 'package.json'), 'utf8')).toBe(manifest);
  });
});
