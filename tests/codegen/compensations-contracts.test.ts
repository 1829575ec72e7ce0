import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shapeHash } from '../../dsl/workflow-shape.js';
import type { AnyWorkflow } from '../../dsl/workflow.js';
import type { CodegenRun } from '../../codegen/run-codegen.js';
import { compileAgainstContracts, expectMarkedTypeErrors } from './support/contract-project.js';
import type { TempProject } from './support/temp-project.js';

/**
 * Compensations end to end: the shape codegen reads statically (compensations, compensateOnCancel)
 * hashes as the runtime hashes the loaded definition, and the generated contract demands a handler
 * per compensation, of its kind, seeing the outputs up to the step it undoes (that step's output
 * even when the step is conditional).
 */
const CASE_INPUT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'cases', 'valid-compensations', 'input');

const HANDLERS = `import { bookingHandlers, type BookingHandlers } from './generated/index.js';

export const handlers: BookingHandlers = {
  holdSeats: async (ctx) => ctx.record({ holdId: ctx.key }),
  charge: { perform: async ({ key }) => ({ chargeId: key }) },
  notify: { perform: async ({ key }) => ({ messageId: key }), reconcile: async () => ({ status: 'not_found' }) },
  // "notify" is conditional, but its compensation runs only once its effect is recorded: its output is there.
  sendApology: { perform: async ({ steps }) => ({ messageId: steps.notify.messageId }), reconcile: async () => ({ status: 'not_found' }) },
  refund: { perform: async ({ key, steps }) => ({ refundId: \`\${key}:\${steps.charge.chargeId}\` }) },
  releaseSeats: async (ctx) => ctx.record({ released: ctx.input.seats + ctx.steps.holdSeats.holdId.length }),
};

export const registration = bookingHandlers(handlers);
`;

const WRONG = `import { bookingHandlers } from './generated/index.js';

export const registration = bookingHandlers({
  holdSeats: async (ctx) => ctx.record({ holdId: ctx.key }),
  charge: { perform: async ({ key }) => ({ chargeId: key }) },
  notify: { perform: async ({ key }) => ({ messageId: key }), reconcile: async () => ({ status: 'not_found' }) },
  sendApology: { perform: async ({ key }) => ({ messageId: key }) }, // expect-error TS2741
  refund: { perform: async ({ steps }) => ({ refundId: steps.notify.messageId }) }, // expect-error TS2339
  releaseSeats: async () => ({ released: 1 }), // expect-error TS2322
});
`;

let run: CodegenRun;
let project: TempProject;
let output: string;

beforeAll(async () => {
  ({ run, project, output } = await compileAgainstContracts(CASE_INPUT, 'ledgerflow-compensations', HANDLERS, WRONG));
});

afterAll(() => project?.remove());

describe('workflows with compensations', () => {
  it('have the definition hash the runtime computes from the loaded definition', async () => {
    expect(run.diagnostics).toEqual([]);
    const [model] = run.analysis.workflows;
    expect(model?.steps.map((s) => [s.name, s.compensation?.name, s.compensation?.position])).toEqual([
      ['holdSeats', 'releaseSeats', 5],
      ['charge', 'refund', 4],
      ['notify', 'sendApology', 3],
    ]);
    const module = (await import(pathToFileURL(path.join(CASE_INPUT, model!.file)).href)) as Record<
      string,
      AnyWorkflow
    >;
    const loaded = module[model!.exportName]!;
    expect(loaded.compensations.map((c) => [c.name, c.position])).toEqual([
      ['sendApology', 3],
      ['refund', 4],
      ['releaseSeats', 5],
    ]);
    const contract = run.generated!.find((f) => f.path === 'contracts/booking.v1.ts')!.content;
    expect(contract).toContain(`DefinitionHash = '${shapeHash(loaded)}';`);
    const manifest = JSON.parse(run.generated!.find((f) => f.path === 'ledgerflow.manifest.json')!.content) as {
      workflows: { definitionHash: string }[];
    };
    expect(manifest.workflows[0]?.definitionHash).toBe(shapeHash(loaded));
  });

  it('compile: a handler per compensation, of its kind, seeing the outputs up to the step it undoes', () => {
    expectMarkedTypeErrors(output, WRONG);
  });
});
