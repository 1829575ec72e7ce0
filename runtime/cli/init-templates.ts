/**
 * The files `ledgerflow init` writes into a project, as plain text. Each takes the relative
 * import specifiers it needs, so the same templates serve any `--dir`.
 */

/** The migration of the first workflow's own table, in the project's migrations folder. */
export const HELLO_MIGRATION_NAME = '0001_hello_greeting.sql';

export function helloWorkflowTemplate(): string {
  return `import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

/**
 * A first workflow: compose a greeting, then store it. Each step is checkpointed; the
 * transactional step writes its row in the same commit as its ledger entry, so a retry never
 * stores it twice. Change the steps, bump \`version\` when runs may be in flight, and run
 * \`npx ledgerflow codegen\` after every change.
 */
export const hello = workflow('hello', {
  version: 1,
  input: z.object({ name: z.string().min(1) }),
})
  // A \`step\` computes or reads. It may run more than once, so it must not write.
  .step('compose', {
    output: z.object({ message: z.string() }),
  })
  // A \`transactional\` step writes through ctx.tx. Its key is a pure function of the input and
  // earlier outputs, so every retry, on any worker, uses the same one.
  .transactional('saveGreeting', {
    output: z.object({ message: z.string() }),
    key: ({ input }) => \`greeting:\${input.name}\`,
  });
`;
}

/** `contractImport`: the generated contract, e.g. `../../generated/contracts/hello.v1.js`. */
export function helloHandlersTemplate(contractImport: string): string {
  return `import type { WorkflowRegistration } from 'ledgerflow/runtime';
import { helloHandlers } from '${contractImport}';
import type { hello } from './hello.workflow.js';

/** The tables these handlers use, as Kysely types (created by ${HELLO_MIGRATION_NAME}). */
export type HelloDatabase = {
  hello_greeting: { name: string; message: string };
};

/** \`hello\` bound to its handlers, ready for a worker. The generated contract types each one. */
export function helloRegistration(): WorkflowRegistration<typeof hello> {
  return helloHandlers<HelloDatabase>({
    compose: async ({ input }) => ({ message: \`Hello, \${input.name}!\` }),

    saveGreeting: async (ctx) => {
      await ctx.tx
        .insertInto('hello_greeting')
        .values({ name: ctx.input.name, message: ctx.steps.compose.message })
        // Another run may have greeted this name already.
        .onConflict((oc) => oc.column('name').doNothing())
        .execute();
      return ctx.record({ message: ctx.steps.compose.message });
    },
  });
}
`;
}

/** The module a worker loads: \`ledgerflow worker --workflows <this file>\`. */
export function workflowsIndexTemplate(): string {
  return `import { helloRegistration } from './hello.handlers.js';

// Every workflow this project runs, bound to its handlers. Add each new registration here.
export const workflows = [helloRegistration()];
`;
}

/** `workflowsImport`: the workflows module relative to the worker, e.g. `./workflows/index.js`. */
export function workerTemplate(workflowsImport: string): string {
  return `import { createWorker, openStore } from 'ledgerflow/runtime';
import { workflows } from '${workflowsImport}';

// A worker inside your own process (\`npx ledgerflow worker --workflows …\` does the same from the
// command line). DATABASE_URL → PostgreSQL; otherwise the embedded PGlite under .ledgerflow/db,
// which one process at a time may open.
const store = await openStore();
const worker = createWorker({
  store,
  workflows,
  onEvent(event) {
    if (event.type === 'run-completed' || event.type === 'run-parked') console.log(\`\${event.type} \${event.runId}\`);
    if (event.type === 'error') console.error(event.error);
  },
});
await worker.start();
console.log(\`Worker \${worker.id} running on \${store.location}. Stop with Ctrl-C or SIGTERM.\`);

const stop = (): void => void worker.stop().then(() => store.close());
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
`;
}

export function helloMigrationTemplate(): string {
  return `-- The first workflow's own table. Your migrations live here, numbered and append-only:
-- \`npx ledgerflow migrate\` applies each once, after ledgerflow's core migrations.
-- Names must be unique across this folder and generated/migrations.
CREATE TABLE IF NOT EXISTS hello_greeting (
  name text PRIMARY KEY,
  message text NOT NULL
);
`;
}

/** `.github/workflows/ledgerflow.yml`: the CI gate on keys and on generated/ being fresh. */
export function ciWorkflowTemplate(): string {
  return `# Fails the build when an effect step has no stable key, or when generated/ (contracts,
# migrations, manifest, REVIEW.md) is not what \`npx ledgerflow codegen\` makes of the code.
name: ledgerflow
on:
  push:
  pull_request:
jobs:
  codegen-check:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-node@v4
        with:
          node-version: 20
          cache: npm
      - run: npm ci
      # --format github turns each diagnostic into an annotation on the offending line.
      - run: npx ledgerflow codegen --check --format github
`;
}

/** A tsconfig.json for a project that has none: the settings ledgerflow needs (see init-tsconfig.ts). */
export function tsconfigTemplate(): string {
  // `types`: the scaffold's worker uses Node's `process`, and TypeScript 6+ includes no @types by default.
  const compilerOptions = {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    types: ['node'],
    skipLibCheck: true,
    noEmit: true,
  };
  return `${JSON.stringify({ compilerOptions }, null, 2)}\n`;
}
