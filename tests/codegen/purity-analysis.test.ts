import path from 'node:path';
import { ts } from 'ts-morph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AnalysisProgram } from '../../codegen/analysis/analysis-program.js';
import { PurityAnalyzer } from '../../codegen/analysis/purity-analyzer.js';
import { constFunction, type FunctionLike } from '../../codegen/analysis/syntax.js';
import type { ContextDescription } from '../../codegen/model/purity.js';
import { TempProject } from './support/temp-project.js';

/**
 * The purity analysis on its own, with contexts other than a key's: what a condition, an event
 * match or a partition key checker would call. (Keys go through the golden cases.)
 */
const SOURCE = `
export const canShip = ({ input, steps }: any) => steps.charge.amountCents >= input.minimumCents;
export const matchesOrder = ({ input, event }: any) => event.orderId === input.orderId;
export const partitionKey = ({ input }: any) => \`\${input.tenant}:\${Date.now()}\`;
export const readsSteps = (ctx: any) => ctx.steps.charge.id;
export const readsEverything = (ctx: any) => JSON.stringify(ctx);
export const ignoresContext = () => 'always';
`;

let project: TempProject;
let analyzer: PurityAnalyzer;
let functions: Map<string, FunctionLike>;

beforeAll(() => {
  project = new TempProject('ledgerflow-purity');
  const file = project.write('src/functions.ts', SOURCE);
  const program = new AnalysisProgram(project.root, [file]);
  analyzer = new PurityAnalyzer(program);
  functions = new Map();
  for (const statement of program.sourceFile(path.resolve(file))!.statements) {
    if (!ts.isVariableStatement(statement)) continue;
    for (const declaration of statement.declarationList.declarations) {
      const fn = constFunction(declaration);
      if (fn !== null) functions.set(declaration.name.getText(), fn);
    }
  }
});

afterAll(() => project.remove());

const analyze = (name: string, context: ContextDescription) => analyzer.analyze(functions.get(name)!, context);

describe('PurityAnalyzer.analyze', () => {
  it('reports the input fields and steps a condition reads, and no finding when the step is visible', () => {
    const report = analyze('canShip', { data: ['input'], steps: { visible: ['charge'] } });
    expect(report.findings).toEqual([]);
    expect(report.dependsOnContext).toBe(true);
    expect(report.data).toEqual({ input: { whole: false, paths: ['minimumCents'] } });
    expect(report.stepReads.map((r) => `${r.step}.${r.path}`)).toEqual(['charge.amountCents']);
  });

  it('reports a read of a step the context does not make visible', () => {
    const report = analyze('canShip', { data: ['input'], steps: { visible: [] } });
    expect(report.findings).toEqual([
      expect.objectContaining({
        kind: 'invisible-step-read',
        step: 'charge',
        path: 'amountCents',
        text: 'steps.charge.amountCents',
      }),
    ]);
  });

  it('reads any data property the context description names', () => {
    const report = analyze('matchesOrder', { data: ['input', 'event'], steps: null });
    expect(report.data).toEqual({
      input: { whole: false, paths: ['orderId'] },
      event: { whole: false, paths: ['orderId'] },
    });
    expect(report.findings).toEqual([]);
  });

  it('finds the clock in a partition key over the input alone', () => {
    const report = analyze('partitionKey', { data: ['input'], steps: null });
    expect(report.findings).toEqual([
      expect.objectContaining({ kind: 'nondeterministic', source: 'clock', text: 'Date.now()' }),
    ]);
    expect(report.data['input']!.paths).toEqual(['tenant']);
  });

  it('sees no steps in a context that offers none', () => {
    const report = analyze('readsSteps', { data: ['input'], steps: null });
    expect(report.stepReads).toEqual([]);
    expect(report.dependsOnContext).toBe(false);
  });

  it('counts a read of the whole context as a read of everything it offers', () => {
    const report = analyze('readsEverything', { data: ['input'], steps: { visible: [] } });
    expect(report.data).toEqual({ input: { whole: true, paths: [] } });
    expect(report.readsAllSteps).toBe(true);
    expect(report.dependsOnContext).toBe(true);
  });

  it('says when a function does not depend on its context', () => {
    const report = analyze('ignoresContext', { data: ['input'], steps: { visible: [] } });
    expect(report).toEqual({
      dependsOnContext: false,
      data: { input: { whole: false, paths: [] } },
      readsAllSteps: false,
      stepReads: [],
      calls: [],
      findings: [],
    });
  });
});
