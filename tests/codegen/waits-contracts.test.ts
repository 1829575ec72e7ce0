import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shapeHash } from '../../dsl/workflow-shape.js';
import type { AnyWorkflow } from '../../dsl/workflow.js';
import { compareGenerated } from '../../codegen/output/compare-generated.js';
import { writeGenerated } from '../../codegen/output/write-generated.js';
import { runCodegen, type CodegenRun } from '../../codegen/run-codegen.js';
import { compileAgainstContracts, expectMarkedTypeErrors } from './support/contract-project.js';
import type { TempProject } from './support/temp-project.js';

/**
 * Conditions, sleeps, waits, children, fan-outs and queues end to end: the shape codegen reads
 * statically hashes as the runtime hashes the loaded definition, and the generated contracts and
 * event senders compile with handlers for exactly the steps that take one.
 */
const CASES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'cases');
const CASE_INPUT = path.join(CASES, 'valid-waits-and-children', 'input');
const QUEUES_INPUT = path.join(CASES, 'valid-queues', 'input');

const HANDLERS = `import type { EventSender } from 'ledgerflow/runtime';
import { ordersHandlers, sendApprovalGiven, sendPaymentSettled, type OrdersHandlers } from './generated/index.js';

export const handlers: OrdersHandlers = {
  plan: () => ({ batchCount: 3 }),
  // A conditional step's handler returns its output; later steps see it as possibly undefined.
  quote: ({ input }) => ({ feeCents: input.rows }),
  reserve: async (ctx) => ctx.record({ reservationId: ctx.key }),
  summarize: ({ steps }) => ({ copied: steps.copy.reduce((n, c) => n + c.copied, 0) + (steps.quote?.feeCents ?? 0) }),
};

export const registration = ordersHandlers(handlers);

export async function settle(client: EventSender): Promise<void> {
  await sendPaymentSettled(client, 'order-1', { orderId: 'order-1', paid: true });
  await sendApprovalGiven(client, 'run-id', { by: 'ops' });
}
`;

const WRONG = `import type { EventSender } from 'ledgerflow/runtime';
import { ordersHandlers } from './generated/index.js';
import { sendPaymentSettled } from './generated/contracts/events.js';

export const registration = ordersHandlers({
  plan: () => ({ batchCount: 3 }),
  quote: ({ steps }) => ({ feeCents: steps.plan.batchCount }),
  reserve: async (ctx) => ctx.record({ reservationId: ctx.key }),
  summarize: ({ steps }) => ({ copied: steps.quote.feeCents }), // expect-error TS18048
  settled: () => ({ status: 'timeout', timedOutAt: '' }), // expect-error TS2353
});

export async function settle(client: EventSender): Promise<void> {
  await sendPaymentSettled(client, 'order-1', { orderId: 'order-1', paid: 'yes' }); // expect-error TS2322
}
`;

let run: CodegenRun;
let project: TempProject;
let output: string;

beforeAll(async () => {
  ({ run, project, output } = await compileAgainstContracts(CASE_INPUT, 'ledgerflow-waits', HANDLERS, WRONG));
});

afterAll(() => project?.remove());

describe('workflows with conditions, waits and children', () => {
  it('have the definition hash the runtime computes from the loaded definition', async () => {
    expect(run.diagnostics).toEqual([]);
    expect(run.analysis.workflows.map((w) => w.name)).toEqual(['copy-batch', 'orders', 'shipment']);
    await expectRuntimeHashes(CASE_INPUT, run);
  });

  it('compile: contracts without handlers for built-in steps, typed senders, and handlers for the rest', () => {
    expectMarkedTypeErrors(output, WRONG);
  });

  it('with queues (the whole run, and steps) have the definition hash the runtime computes from the loaded definition', async () => {
    const queued = await runCodegen({ root: QUEUES_INPUT });
    expect(queued.diagnostics).toEqual([]);
    const onboarding = queued.analysis.workflows.find((w) => w.name === 'onboarding')!;
    expect(onboarding.queue?.queue.name).toBe('tenant-runs');
    expect(onboarding.steps.map((s) => s.queue?.queue.name ?? null)).toEqual([null, 'ledger-writes', 'email', 'email']);
    await expectRuntimeHashes(QUEUES_INPUT, queued);
  });

  it('leave no senders behind once no workflow waits for an event: contracts/events.ts is extra, and removed', () => {
    const withoutEvents = run.generated!.filter((f) => f.path !== 'contracts/events.ts');
    expect(compareGenerated(project.root, 'generated', withoutEvents).filter((d) => d.status === 'extra')).toEqual([
      { file: 'generated/contracts/events.ts', status: 'extra' },
    ]);
    expect(writeGenerated(project.root, 'generated', withoutEvents).removed).toEqual(['generated/contracts/events.ts']);
  });
});

/** Each workflow's contract and manifest entry carry the hash the runtime computes from the loaded definition. */
async function expectRuntimeHashes(root: string, codegen: CodegenRun): Promise<void> {
  const manifest = JSON.parse(codegen.generated!.find((f) => f.path === 'ledgerflow.manifest.json')!.content) as {
    workflows: { name: string; version: number; definitionHash: string }[];
  };
  for (const model of codegen.analysis.workflows) {
    const module = (await import(pathToFileURL(path.join(root, model.file)).href)) as Record<string, AnyWorkflow>;
    const loaded = module[model.exportName]!;
    const contract = codegen.generated!.find((f) => f.path === `contracts/${model.name}.v${model.version}.ts`)!.content;
    expect(contract, model.name).toContain(`DefinitionHash = '${shapeHash(loaded)}';`);
    expect(
      manifest.workflows.find((e) => e.name === model.name && e.version === model.version)?.definitionHash,
      model.name,
    ).toBe(shapeHash(loaded));
  }
}
