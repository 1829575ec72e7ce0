import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_MIGRATIONS_DIR } from '../../migrate/migration-source.js';
import { DEFAULT_DATA_DIR } from '../../store/open-store.js';
import { defineCommand, UsageError } from '../command.js';
import { toJsonDocument } from '../format-values.js';
import {
  ciWorkflowTemplate,
  HELLO_MIGRATION_NAME,
  helloHandlersTemplate,
  helloMigrationTemplate,
  helloWorkflowTemplate,
  tsconfigTemplate,
  workerTemplate,
  workflowsIndexTemplate,
} from '../init-templates.js';
import { checkTsconfig, readTsconfigSettings, TsconfigReadError, type TsconfigFix } from '../init-tsconfig.js';

const DEFAULT_WORKFLOWS_DIR = 'src/workflows';
const MIGRATIONS_DIR = 'db/migrations';
const GENERATED_DIR = 'generated';

interface PlannedFile {
  /** Relative to the project root, with forward slashes. */
  readonly path: string;
  readonly content: string;
}

export const initCommand = defineCommand({
  name: 'init',
  summary: 'add a first workflow, its handlers, a worker, migrations and CI to this project',
  usage: '[--dir <directory>] [options]',
  description:
    'Run at the root of an existing project (next to package.json). Writes a first workflow (hello) with its\n' +
    'handlers, the `workflows` module a worker loads, a worker to embed in your process (worker.ts beside the\n' +
    `workflows directory), ${MIGRATIONS_DIR}/ for your own tables and .github/workflows/ledgerflow.yml (the\n` +
    'codegen --check gate), and tsconfig.json if there is none. A file that exists is never overwritten (there\n' +
    'is no --force): it is listed as skipped. An existing tsconfig.json and package.json are checked, not\n' +
    'edited: init prints the settings ledgerflow needs that they lack. Then it prints the commands to run next.',
  options: { dir: { type: 'string' } },
  optionsHelp: `  --dir <directory>      where the workflow files go, inside the project (default: ${DEFAULT_WORKFLOWS_DIR})`,
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, json, io }) {
    const root = process.cwd();
    if (!existsSync(path.join(root, 'package.json'))) {
      throw new UsageError(`No package.json in ${root}. Run init at the root of your project (\`npm init -y\` creates one).`);
    }
    const dir = projectDirectory(root, values.dir ?? DEFAULT_WORKFLOWS_DIR);
    const workerFile = path.posix.join(path.posix.dirname(dir) === '.' ? dir : path.posix.dirname(dir), 'worker.ts');
    const workflowsModule = `${dir}/index.ts`;
    const planned: PlannedFile[] = [
      { path: `${dir}/hello.workflow.ts`, content: helloWorkflowTemplate() },
      { path: `${dir}/hello.handlers.ts`, content: helloHandlersTemplate(importSpecifier(dir, `${GENERATED_DIR}/contracts/hello.v1.js`)) },
      { path: workflowsModule, content: workflowsIndexTemplate() },
      { path: workerFile, content: workerTemplate(importSpecifier(path.posix.dirname(workerFile), `${dir}/index.js`)) },
      { path: `${MIGRATIONS_DIR}/${HELLO_MIGRATION_NAME}`, content: helloMigrationTemplate() },
      { path: '.github/workflows/ledgerflow.yml', content: ciWorkflowTemplate() },
    ];
    const tsconfigFile = path.join(root, 'tsconfig.json');
    const tsconfigExisted = existsSync(tsconfigFile);
    if (!tsconfigExisted) planned.push({ path: 'tsconfig.json', content: tsconfigTemplate() });

    const created: string[] = [];
    const skipped: string[] = [];
    for (const file of planned) {
      const target = path.join(root, file.path);
      if (existsSync(target)) {
        skipped.push(file.path);
        continue;
      }
      mkdirSync(path.dirname(target), { recursive: true });
      // `wx`: a file that appeared since the check is still not overwritten.
      try {
        writeFileSync(target, file.content, { flag: 'wx' });
        created.push(file.path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        skipped.push(file.path);
      }
    }

    let tsconfigFixes: TsconfigFix[] = [];
    let tsconfigError: string | undefined;
    if (tsconfigExisted) {
      try {
        tsconfigFixes = checkTsconfig(await readTsconfigSettings(tsconfigFile));
      } catch (error) {
        if (!(error instanceof TsconfigReadError)) throw error;
        tsconfigError = error.message;
      }
    }
    const packageNotes = checkPackageJson(root);
    const steps = [
      ...packageNotes.install,
      'npx ledgerflow codegen',
      `npx ledgerflow migrate --dir ${DEFAULT_MIGRATIONS_DIR} --dir ${MIGRATIONS_DIR}`,
      `npx ledgerflow start hello --input '{"name":"world"}'`,
      `npx ledgerflow worker --workflows ${workflowsModule}`,
    ];

    if (json) {
      io.out(
        toJsonDocument({
          created,
          skipped,
          tsconfig: tsconfigExisted ? { checked: 'tsconfig.json', error: tsconfigError ?? null, set: tsconfigFixes } : { created: 'tsconfig.json' },
          packageJson: packageNotes.fixes,
          nextSteps: steps,
        }),
      );
      return 0;
    }
    for (const file of created) io.out(`created  ${file}\n`);
    for (const file of skipped) io.out(`skipped  ${file} (exists; left as it is)\n`);
    if (tsconfigError !== undefined) {
      io.out(`\ntsconfig.json could not be read (${tsconfigError}); left as it is. ledgerflow needs these compilerOptions:\n`);
      io.out(`${tsconfigTemplate()}`);
    } else if (tsconfigFixes.length > 0) {
      io.out('\ntsconfig.json is left as it is (init never edits an existing file). Set these compilerOptions:\n');
      for (const fix of tsconfigFixes) io.out(`  ${`${fix.line},`.padEnd(36)} now ${fix.now}: ${fix.reason}\n`);
    } else if (tsconfigExisted) {
      io.out('\ntsconfig.json has the settings ledgerflow needs.\n');
    }
    if (packageNotes.fixes.length > 0) {
      io.out('\npackage.json is left as it is. Set:\n');
      for (const fix of packageNotes.fixes) io.out(`  ${fix}\n`);
    }
    io.out(
      `\nNext steps (the database is PostgreSQL when DATABASE_URL is set, otherwise the embedded PGlite under ${DEFAULT_DATA_DIR}):\n` +
        steps.map((step) => `  ${step}\n`).join('') +
        `\nThe worker runs the pending run and waits for more (Ctrl-C stops it); \`npx ledgerflow runs\` shows it completed.\n` +
        `${workerFile} runs the same worker inside your own process. After changing a workflow, run codegen again.\n`,
    );
    return 0;
  },
});

/** `--dir` relative to the root, with forward slashes; refuses anything outside the project. */
function projectDirectory(root: string, dir: string): string {
  const relative = path.relative(root, path.resolve(root, dir));
  if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) {
    throw new UsageError(`--dir ${dir} must be a directory inside the project, below ${root} (e.g. src/workflows).`);
  }
  return relative.split(path.sep).join('/');
}

/** A relative ESM import specifier from directory `from` to file `to` (both relative to the root). */
function importSpecifier(from: string, to: string): string {
  const relative = path.posix.relative(from, to);
  return relative.startsWith('.') ? relative : `./${relative}`;
}

/** What package.json lacks: `"type": "module"` (told, not edited), and the packages to install. */
function checkPackageJson(root: string): { fixes: string[]; install: string[] } {
  let manifest: { type?: unknown; dependencies?: Record<string, unknown>; devDependencies?: Record<string, unknown> };
  try {
    manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as typeof manifest;
  } catch (error) {
    throw new UsageError(`package.json is not valid JSON (${(error as Error).message}); fix it and run init again.`);
  }
  const fixes = manifest.type === 'module' ? [] : ['"type": "module"    (ledgerflow and the files init writes are ES modules)'];
  const declared = { ...manifest.devDependencies, ...manifest.dependencies };
  const missing = ['ledgerflow', 'zod'].filter((name) => !(name in declared));
  return { fixes, install: missing.length > 0 ? [`npm install ${missing.join(' ')}`] : [] };
}
