import type { StepKind } from '../../dsl/step-kind.js';
import { shapeHash } from '../../dsl/workflow-shape.js';
import {
  compensationsOf,
  stepsAndCompensations,
  visibleSteps,
  type CompensationModel,
  type StepModel,
  type WorkflowModel,
} from '../model/workflow-model.js';
import { inComment, tsHeader } from './generated-file.js';
import { contractNames, importSpecifier } from './naming.js';

const MAX_LINE = 120;

type HandlerType = 'StepHandler' | 'TransactionalHandler' | 'IdempotentExternalHandler' | 'ReconcilingExternalHandler';

interface HandlerShape {
  readonly type: HandlerType;
  readonly usesDatabase: boolean;
  readonly doc: string;
}

/**
 * The handler contract each kind demands (see runtime/contracts/handler-types.ts); null for the
 * built-in kinds, which take no handler: the runtime carries them out.
 */
const HANDLER_SHAPES: Record<StepKind, (step: StepModel | CompensationModel) => HandlerShape | null> = {
  step: () => ({
    type: 'StepHandler',
    usesDatabase: true,
    doc: 'compute or read (`ctx.db` is read-only), then return the output; it is checkpointed and never recomputed.',
  }),
  transactional: () => ({
    type: 'TransactionalHandler',
    usesDatabase: true,
    doc: 'write through `ctx.tx` only and `return ctx.record(output)`; both commit with the ledger row.',
  }),
  external: (step) =>
    step.idempotentByKey
      ? {
          type: 'IdempotentExternalHandler',
          usesDatabase: false,
          doc: '`perform` must send `ctx.key` to the provider, which dedupes by it; `reconcile` is optional.',
        }
      : {
          type: 'ReconcilingExternalHandler',
          usesDatabase: false,
          doc: '`perform` calls the provider with `ctx.key`; `reconcile` looks the effect up by key after a crash.',
        },
  sleep: () => null,
  waitFor: () => null,
  child: () => null,
  forEach: () => null,
};

/**
 * The per-version contract module (`contracts/<name>.v<version>.ts`): input and output types
 * (every step's and compensation's), an explicit handler interface whose members are the
 * kind-specific handler types of the steps that take one and of the compensations, the definition hash and a `bindHandlers` wrapper. Pure: plain
 * data in, text out.
 *
 * @param contractPath where the module goes, relative to the codegen root (for its imports).
 */
export function emitContractModule(workflow: WorkflowModel, contractPath: string): string {
  const names = contractNames(workflow);
  const wf = workflow.exportName;
  const compensations = compensationsOf(workflow);
  const handled = stepsAndCompensations(workflow).flatMap((step) => {
    const shape = HANDLER_SHAPES[step.kind](step);
    return shape === null ? [] : [{ step, shape, output: names.outputs[step.position]! }];
  });
  const builtIn = workflow.steps.filter((step) => HANDLER_SHAPES[step.kind](step) === null);
  // A conditional step's handler returns its output; later steps see it as possibly undefined.
  // A compensation's output is not a step output: the contract reads it from its spec.
  const stepSpecs = handled.some(({ step }) => step.conditional) || compensations.length > 0;
  const dslImports = ['WorkflowInput', 'WorkflowOutput', ...(stepSpecs ? ['WorkflowStepSpec'] : [])];
  const handlerTypes = [...new Set(handled.map((h) => h.shape.type))].sort();
  const runtimeImports = [
    'bindHandlers',
    ...[...handlerTypes, 'WorkflowHandlers', 'WorkflowRegistration'].map((t) => `type ${t}`),
  ];
  const hash = shapeHash(workflow);
  const title = `workflow "${workflow.name}" v${workflow.version}`;

  const out: string[] = [
    tsHeader(
      `Source: ${workflow.file} (export ${wf}). Regenerate with \`npx ledgerflow codegen\`;`,
      '`npx ledgerflow codegen --check` fails CI when this file is stale.',
    ),
    `import type { ${dslImports.join(', ')} } from 'ledgerflow/dsl';`,
    `import {\n${runtimeImports.map((i) => `  ${i},`).join('\n')}\n} from 'ledgerflow/runtime';`,
    `import { ${wf} } from '${importSpecifier(contractPath, workflow.file)}';`,
    '',
    `/** Validated input of ${title}, as handlers and keys see it. */`,
    `export type ${names.input} = WorkflowInput<typeof ${wf}>;`,
  ];
  workflow.steps.forEach((step, i) => {
    const kind = step.conditional ? `${step.kind}; undefined when its condition skipped it` : step.kind;
    out.push('', `/** Output of "${step.name}", step ${step.position + 1} of ${workflow.steps.length} (${kind}). */`);
    out.push(`export type ${names.outputs[i]} = WorkflowOutput<typeof ${wf}>['${step.name}'];`);
  });
  for (const compensation of compensations) {
    out.push(
      '',
      `/** Output of "${compensation.name}", the compensation of "${compensation.compensates}" (${compensation.kind}). */`,
    );
    out.push(
      `export type ${names.outputs[compensation.position]} = WorkflowStepSpec<typeof ${wf}, '${compensation.name}'>['output'];`,
    );
  }

  out.push(
    '',
    '/**',
    ` * Handlers for ${title}: one per step${compensations.length === 0 ? '' : ' and compensation'}, each of the shape its kind demands, so an`,
    ' * effect cannot bypass the ledger. `DB` is your Kysely database type: `ctx.tx` of `transactional` steps,',
    ' * read-only `ctx.db` of `step` steps.',
    ...wrap(
      builtIn.length === 0
        ? ''
        : `No handler for ${builtIn.map((s) => `"${s.name}" (${s.kind})`).join(', ')}: the runtime carries ${builtIn.length === 1 ? 'it' : 'them'} out.`,
    ).map((line) => ` * ${line}`),
    ' */',
    `export interface ${names.handlers}<DB = {}> {`,
  );
  for (const { step, shape, output } of handled) {
    // A compensation runs only once its step's effect is recorded: it sees that step's output even when the step is conditional.
    const seen = (s: StepModel): string =>
      'compensates' in step && s.name === step.compensates && s.conditional
        ? `WorkflowStepSpec<typeof ${wf}, '${s.name}'>['output']`
        : names.outputs[s.position]!;
    const earlier = visibleSteps(workflow, step).map((s) => `readonly ${s.name}: ${seen(s)}`);
    const priorInline = earlier.length === 0 ? '{}' : `{ ${earlier.join('; ')} }`;
    const result = step.conditional ? `WorkflowStepSpec<typeof ${wf}, '${step.name}'>['output']` : output;
    const args = [names.input, priorInline, result, ...(shape.usesDatabase ? ['DB'] : [])];
    const undoes = 'compensates' in step ? ` compensation of "${step.compensates}"` : '';
    const summary = `${step.kind}${undoes}${step.idempotentByKey ? ' (idempotentByKey)' : ''}: ${shape.doc}`;
    const condition = step.functions.find((f) => f.part === 'when');
    const doc = [
      summary,
      ...(step.key === null ? [] : [`Key: \`\` ${inComment(step.key.text)} \`\``]),
      ...(condition === undefined ? [] : [`Runs only when \`\` ${inComment(condition.text)} \`\` returns true.`]),
    ];
    if (doc.length === 1) out.push(`  /** ${summary} */`);
    else out.push('  /**', ...doc.map((line) => `   * ${line}`), '   */');
    const member = `  readonly ${step.name}: ${shape.type}<${args.join(', ')}>;`;
    if (member.length <= MAX_LINE) {
      out.push(member);
    } else {
      // Prior steps one per line: the `steps` a handler of this step sees, exactly as the DSL types it.
      const prior = earlier.length === 0 ? '{}' : `{\n${earlier.map((e) => `      ${e};`).join('\n')}\n    }`;
      const lines = [args[0]!, prior, ...args.slice(2)].map((a, j, all) => `    ${a}${j < all.length - 1 ? ',' : ''}`);
      out.push(`  readonly ${step.name}: ${shape.type}<`, ...lines, '  >;');
    }
  }
  out.push('}');

  out.push(
    '',
    `/** Shape hash of ${title} when this file was generated; \`bindHandlers\` rejects a definition that drifted. */`,
    `export const ${names.definitionHash} = '${hash}';`,
    '',
    '/**',
    ` * Binds handlers to ${title}, for a worker.`,
    ' *',
    ' * @example',
    ` * const registration = ${names.bind}<AppDatabase>(${handled.length === 0 ? '{}' : `{ ${handled.map((h) => `${h.step.name}: ...`).join(', ')} }`});`,
    ' */',
    `export function ${names.bind}<DB = {}>(handlers: ${names.handlers}<DB>): WorkflowRegistration<typeof ${wf}> {`,
    `  return bindHandlers<typeof ${wf}, DB>(${wf}, handlers, ${names.definitionHash});`,
    '}',
    '',
    '// Compile-time proof, in both directions, that the interface above is exactly the contract the',
    '// DSL derives for the workflow: if they drift apart, this file stops compiling.',
    'type AssertAssignable<T extends U, U> = [T, U];',
    `export type ${names.handlers}MatchDsl<DB> = [`,
    `  AssertAssignable<${names.handlers}<DB>, WorkflowHandlers<typeof ${wf}, DB>>,`,
    `  AssertAssignable<WorkflowHandlers<typeof ${wf}, DB>, ${names.handlers}<DB>>,`,
    '];',
  );
  return `${out.join('\n')}\n`;
}

/** Text as doc comment lines of at most 100 characters (a word longer than that stays whole); none for ''. */
function wrap(text: string): string[] {
  const lines: string[] = [];
  for (const word of text.split(' ').filter((w) => w !== '')) {
    const last = lines.at(-1);
    if (last !== undefined && last.length + 1 + word.length <= 100) lines[lines.length - 1] = `${last} ${word}`;
    else lines.push(word);
  }
  return lines;
}
