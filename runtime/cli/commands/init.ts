import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_MIGRATIONS_DIR } from '../../migrate/migration-source.js';
import { DEFAULT_DATA_DIR } from '../../store/open-store.js';
import { defineCommand, UsageError } from '../command.js';
import { toJsonDocument } from '../../presentation/format-values.js';
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
import { preparePackageJson, SET_MODULE_TYPE_STEP, type PackageJsonReport } from '../init-package-json.js';
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
    'is no --force): it is listed as skipped. An existing tsconfig.json is checked, not edited: init prints the\n' +
    'settings ledgerflow needs that it lacks. package.json gets "type": "module" (ledgerflow and these files are\n' +
    "ES modules) when no .js, .jsx, .ts or .tsx file of the project but init's could rely on CommonJS; otherwise\n" +
    'init names those files and setting the type is the first next step. Then it prints the commands to run next.',
  options: { dir: { type: 'string' } },
  optionsHelp: `  --dir <directory>      where the workflow files go, inside the project (default: ${DEFAULT_WORKFLOWS_DIR})`,
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, json, io }) {
    const root = process.cwd();
    if (!existsSync(path.join(root, 'package.json'))) {
      throw new UsageError(
        `No package.json in ${root}. Run init at the root of your project (\`npm init -y\` creates one).`,
      );
    }
    const dir = projectDirectory(root, values.dir ?? DEFAULT_WORKFLOWS_DIR);
    const workerFile = path.posix.join(path.posix.dirname(dir) === '.' ? dir : path.posix.dirname(dir), 'worker.ts');
    const workflowsModule = `${dir}/index.ts`;
    const planned: PlannedFile[] = [
      { path: `${dir}/hello.workflow.ts`, content: helloWorkflowTemplate() },
      {
        path: `${dir}/hello.handlers.ts`,
        content: helloHandlersTemplate(importSpecifier(dir, `${GENERATED_DIR}/contracts/hello.v1.js`)),
      },
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
    const packageJson = preparePackageJson(root, new Map(planned.map((file) => [file.path, file.content])));
    const steps = [
      ...(packageJson.isModule ? [] : [SET_MODULE_TYPE_STEP]),
      ...(packageJson.installStep !== undefined ? [packageJson.installStep] : []),
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
          tsconfig: tsconfigExisted
            ? { checked: 'tsconfig.json', error: tsconfigError ?? null, set: tsconfigFixes }
            : { created: 'tsconfig.json' },
          packageJson: {
            type: packageJson.isModule ? 'module' : (packageJson.typeWas ?? null),
            typeWas: packageJson.typeWas ?? null,
            edited: packageJson.edited,
            commonJsFiles: packageJson.commonJsFiles,
          },
          nextSteps: steps,
        }),
      );
      return 0;
    }
    for (const file of created) io.out(`created  ${file}\n`);
    for (const file of skipped) io.out(`skipped  ${file} (exists; left as it is)\n`);
    if (packageJson.edited)
      io.out(
        `edited   package.json: "type": "module" (was ${typeShown(packageJson)}; nothing else here relied on CommonJS)\n`,
      );
    if (tsconfigError !== undefined) {
      io.out(
        `\ntsconfig.json could not be read (${tsconfigError}); left as it is. ledgerflow needs these compilerOptions:\n`,
      );
      io.out(`${tsconfigTemplate()}`);
    } else if (tsconfigFixes.length > 0) {
      io.out('\ntsconfig.json is left as it is (init never edits an existing file). Set these compilerOptions:\n');
      for (const fix of tsconfigFixes) io.out(`  ${`${fix.line},`.padEnd(36)} now ${fix.now}: ${fix.reason}\n`);
    } else if (tsconfigExisted) {
      io.out('\ntsconfig.json has the settings ledgerflow needs.\n');
    }
    if (!packageJson.isModule) {
      const files = `${packageJson.commonJsFiles.join(', ')}${packageJson.moreCommonJsFiles ? ' and more' : ''}`;
      io.out(
        `\npackage.json is left as it is: its "type" is ${typeShown(packageJson)}, and node loads ${files} as CommonJS under it.\n` +
          'ledgerflow and the files init writes are ES modules: set "type": "module" (the first step below), and make those\n' +
          'files ES modules too (or rename them to .cjs).\n',
      );
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

/** The "type" init found, for a message: `"commonjs"`, or `not set (CommonJS)`. */
function typeShown(packageJson: PackageJsonReport): string {
  return packageJson.typeWas === undefined ? 'not set (CommonJS)' : JSON.stringify(packageJson.typeWas);
}
