import { describe, expect, it } from 'vitest';
import { shapeHash } from '../../dsl/workflow-shape.js';
import { emitContractModule } from '../../codegen/emit/contract-module.js';
import { emitEventsModule } from '../../codegen/emit/events-module.js';
import { emitGenerated } from '../../codegen/emit/emit-generated.js';
import { DO_NOT_EDIT } from '../../codegen/emit/generated-file.js';
import { emitIndexModule } from '../../codegen/emit/index-module.js';
import { emitManifest } from '../../codegen/emit/manifest-json.js';
import { planMigrations } from '../../codegen/emit/migrations.js';
import { eventSenderName, importSpecifier, pascalCase } from '../../codegen/emit/naming.js';
import { emitReview } from '../../codegen/emit/review-markdown.js';
import { stableJson } from '../../codegen/emit/stable-json.js';
import { parseManifest } from '../../codegen/model/manifest.js';
import { waitedEvents } from '../../codegen/model/waited-events.js';
import { PART_KINDS, pinnedPartKinds, type PinnedPart } from '../../codegen/model/pinned-parts.js';
import type {
  EventReference,
  KeyModel,
  QueueReference,
  StepFunctionModel,
  StepModel,
  WorkflowModel,
} from '../../codegen/model/workflow-model.js';

// Emitters take plain data: these models are written by hand, no compiler involved.
const at = (line: number) => ({ file: 'shop/refund.workflow.ts', line, col: 3 });

function key(text: string, overrides: Partial<KeyModel> = {}): KeyModel {
  return {
    text,
    location: at(1),
    inputFields: ['orderId'],
    readsWholeInput: false,
    readsAllSteps: false,
    stepReads: [],
    readsItem: false,
    calls: [],
    dependsOnContext: true,
    findings: [],
    ...overrides,
  };
}

function step(name: string, kind: StepModel['kind'], position: number, overrides: Partial<StepModel> = {}): StepModel {
  return {
    name,
    kind,
    position,
    idempotentByKey: false,
    location: at(10 + position),
    key: kind === 'step' ? null : key(`({ input }) => \`${name}:\${input.orderId}\``),
    functions: [],
    conditional: false,
    hasRequest: false,
    hasRetry: false,
    performTimeoutText: null,
    ...overrides,
  };
}

function workflow(name: string, version: number, exportName: string, steps: readonly StepModel[]): WorkflowModel {
  // A made-up hash per part: the input, each step's output, and the key of each keyed step.
  const parts: PinnedPart[] = [
    { kind: 'input', step: null, hash: `${name}-input`, location: at(6) },
    ...steps.flatMap((s): PinnedPart[] => [
      { kind: 'output', step: s.name, hash: `${s.name}-output`, location: s.location },
      ...(s.key === null
        ? []
        : [{ kind: 'key' as const, step: s.name, hash: `${s.name}-key`, location: s.key.location }]),
    ]),
  ];
  return {
    name,
    version,
    exportName,
    file: `shop/${name}.workflow.ts`,
    location: at(5),
    versionLocation: at(5),
    steps,
    parts,
  };
}

const refund = workflow('refund', 1, 'refund', [
  step('load', 'step', 0),
  step('reserve', 'transactional', 1),
  step('refund', 'external', 2, { idempotentByKey: true, performTimeoutText: '5_000' }),
  step('notify', 'external', 3, {
    key: key('({ steps }) => `notify:${steps.reserve.id}`', {
      inputFields: [],
      stepReads: [{ step: 'reserve', path: 'id', at: at(20), via: [] }],
    }),
  }),
]);
const invoice = workflow('invoice', 3, 'invoiceV3', [step('issue', 'transactional', 0)]);

describe('contract module', () => {
  const text = emitContractModule(refund, 'generated/contracts/refund.v1.ts');

  it('imports the workflow from its source with a relative .js path, and the runtime by package name', () => {
    expect(text.startsWith(`// ${DO_NOT_EDIT}\n`)).toBe(true);
    expect(text).toContain("import { refund } from '../../shop/refund.workflow.js';");
    expect(text).toContain("} from 'ledgerflow/runtime';");
  });

  it('gives each step the handler type of its kind with exactly the earlier steps as prior', () => {
    expect(text).toContain('readonly load: StepHandler<RefundInput, {}, RefundLoadOutput, DB>;');
    expect(text).toMatch(
      /readonly reserve: TransactionalHandler<RefundInput, \{ readonly load: RefundLoadOutput \}, RefundReserveOutput, DB>;/,
    );
    expect(text).toMatch(
      /readonly refund: IdempotentExternalHandler<\s+RefundInput,\s+\{\s+readonly load: RefundLoadOutput;\s+readonly reserve: RefundReserveOutput;\s+\},\s+RefundRefundOutput\s+>;/,
    );
    expect(text).toMatch(
      /readonly notify: ReconcilingExternalHandler<[^>]*readonly refund: RefundRefundOutput;\s+\},\s+RefundNotifyOutput\s+>;/,
    );
  });

  it('exports the definition hash and a binder named after the workflow const', () => {
    expect(text).toContain(`export const refundDefinitionHash = '${shapeHash(refund)}';`);
    expect(text).toContain(
      'export function refundHandlers<DB = {}>(handlers: RefundHandlers<DB>): WorkflowRegistration<typeof refund> {',
    );
    expect(text).toContain('return bindHandlers<typeof refund, DB>(refund, handlers, refundDefinitionHash);');
  });

  it('imports only the handler types it uses', () => {
    const only = emitContractModule(invoice, 'generated/contracts/invoice.v3.ts');
    expect(only).toContain('type TransactionalHandler,');
    expect(only).not.toContain('StepHandler');
    expect(only).not.toContain('ExternalHandler');
    expect(only).toContain('export interface InvoiceV3Handlers<DB = {}> {');
  });
});

describe('index module', () => {
  it('re-exports every contract and lists the workflow consts sorted by name and version', () => {
    const v2 = workflow('refund', 2, 'refundV2', refund.steps);
    const text = emitIndexModule([v2, refund, invoice], 'generated');
    expect(text).toContain("import { invoiceV3 } from '../shop/invoice.workflow.js';");
    expect(text.indexOf("export * from './contracts/invoice.v3.js';")).toBeLessThan(
      text.indexOf("export * from './contracts/refund.v1.js';"),
    );
    expect(text).toContain('export const workflows = [\n  invoiceV3,\n  refund,\n  refundV2,\n] as const;');
  });
});

describe('migration plan (append-only)', () => {
  it('plans no core schema (it ships with the runtime) and numbers versions from 0002 on a fresh directory', () => {
    const plan = planMigrations([refund, invoice], []);
    // 0002, not 0001: older checkouts have the core schema codegen used to write as 0001_core.sql.
    expect(plan.files.map((f) => f.path)).toEqual(['migrations/0002_invoice_v3.sql', 'migrations/0003_refund_v1.sql']);
    expect(plan.files.every((f) => f.content.startsWith(`-- ${DO_NOT_EDIT}\n`))).toBe(true);
    expect(plan.files[1]!.content).toContain("VALUES ('refund', 1, ");
  });

  it('leaves an old 0001_core.sql alone and plans nothing for it', () => {
    const plan = planMigrations([refund], ['0001_core.sql']);
    expect(plan.files.map((f) => f.path)).toEqual(['migrations/0002_refund_v1.sql']);
  });

  it('never schedules an existing file and numbers new versions after the highest existing one', () => {
    const v2 = workflow('refund', 2, 'refundV2', refund.steps);
    const plan = planMigrations([v2, refund, invoice], ['0001_core.sql', '0002_refund_v1.sql', '0005_custom.sql']);
    expect(plan.files.map((f) => f.path)).toEqual(['migrations/0006_invoice_v3.sql', 'migrations/0007_refund_v2.sql']);
    expect(plan.byWorkflow.get('refund@1')).toBe('0002_refund_v1.sql');
    expect(plan.byWorkflow.get('refund@2')).toBe('0007_refund_v2.sql');
  });

  it('does not mistake another workflow whose name ends the same way for this one', () => {
    const plan = planMigrations([refund], ['0001_core.sql', '0002_partial-refund_v1.sql']);
    expect(plan.files.map((f) => f.path)).toEqual(['migrations/0003_refund_v1.sql']);
  });
});

describe('manifest', () => {
  it('is stable JSON with the hash, migration and key text per version', () => {
    const text = emitManifest(
      [refund, invoice],
      new Map([
        ['refund@1', '0003_refund_v1.sql'],
        ['invoice@3', '0002_invoice_v3.sql'],
      ]),
    );
    const parsed = parseManifest('m.json', text);
    expect(parsed.status).toBe('present');
    if (parsed.status !== 'present') return;
    expect(parsed.manifest.workflows.map((w) => `${w.name}@${w.version}`)).toEqual(['invoice@3', 'refund@1']);
    const entry = parsed.manifest.workflows[1]!;
    expect(entry.definitionHash).toBe(shapeHash(refund));
    expect(entry.migration).toBe('0003_refund_v1.sql');
    expect(entry.steps.map((s) => s.key)).toEqual([
      null,
      '({ input }) => `reserve:${input.orderId}`',
      '({ input }) => `refund:${input.orderId}`',
      '({ steps }) => `notify:${steps.reserve.id}`',
    ]);
    expect(text).toBe(stableJson(JSON.parse(text)));
  });

  it('pins a hash per part per version, and lists the part kinds it pins', () => {
    const text = emitManifest([refund], new Map());
    const parsed = parseManifest('m.json', text);
    if (parsed.status !== 'present') throw new Error('expected a manifest');
    const entry = parsed.manifest.workflows[0]!;
    // Without a queue, the entry reads as it did before queues existed.
    expect(entry.partKinds).toEqual(pinnedPartKinds(false));
    expect(entry.partKinds).toEqual([
      'input',
      'output',
      'key',
      'request',
      'when',
      'for',
      'until',
      'match',
      'items',
      'childInput',
      'event',
      'timeoutMs',
      'concurrency',
    ]);
    expect(entry).not.toHaveProperty('queue');
    expect(entry.steps.filter((s) => 'queue' in s)).toEqual([]);
    expect(entry.parts).toEqual({
      input: 'refund-input',
      'steps.load.output': 'load-output',
      'steps.reserve.output': 'reserve-output',
      'steps.reserve.key': 'reserve-key',
      'steps.refund.output': 'refund-output',
      'steps.refund.key': 'refund-key',
      'steps.notify.output': 'notify-output',
      'steps.notify.key': 'notify-key',
    });
    expect(parsed.entryLines).toEqual([text.split('\n').indexOf('    {') + 1]);
  });

  it('reads a manifest of an earlier release (no part hashes) as present', () => {
    const old = { workflows: [{ name: 'refund', version: 1, definitionHash: 'abc', steps: [] }] };
    const parsed = parseManifest('m.json', JSON.stringify(old, null, 2));
    expect(parsed).toMatchObject({ status: 'present', entryLines: [3] });
  });

  it('rejects a manifest it cannot trust, with the reason', () => {
    expect(parseManifest('m.json', '{')).toMatchObject({
      status: 'invalid',
      error: expect.stringContaining('not valid JSON'),
    });
    expect(parseManifest('m.json', '{"workflows":[{"name":"x"}]}')).toMatchObject({
      status: 'invalid',
      error: expect.stringContaining('workflows[0]'),
    });
    const entry = { name: 'x', version: 1, definitionHash: 'abc', steps: [] };
    expect(parseManifest('m.json', JSON.stringify({ workflows: [{ ...entry, parts: { input: 1 } }] }))).toMatchObject({
      status: 'invalid',
      error: 'workflows[0] has partKinds or parts of the wrong shape',
    });
    expect(parseManifest('m.json', JSON.stringify({ workflows: [{ ...entry, partKinds: 'input' }] }))).toMatchObject({
      status: 'invalid',
    });
  });
});

describe('review', () => {
  const text = emitReview([refund]);

  it('answers the four questions for every effect step and none for plain steps', () => {
    for (const name of ['reserve', 'refund', 'notify']) expect(text).toContain(`### \`${name}\``);
    expect(text).not.toContain('### `load`');
    expect(text.match(/1\. \*\*Key and why it is stable\.\*\*/g)).toHaveLength(3);
    expect(text.match(/4\. \*\*Who reconciles and how the gap is found\.\*\*/g)).toHaveLength(3);
  });

  it('answers per kind: transactional has no gap, idempotent retries with the key, reconciling needs reconcile', () => {
    const section = (name: string) => text.slice(text.indexOf(`### \`${name}\``)).split('\n### ')[0]!;
    expect(section('reserve')).toContain('There is no gap');
    expect(section('refund')).toContain('`performTimeoutMs: 5_000`');
    expect(section('refund')).toContain('performed again with the same key');
    expect(section('notify')).toContain('requires a `reconcile({ key, intent })`');
    expect(section('notify')).toContain('the output of earlier step (`reserve.id`)');
    expect(section('reserve')).toContain('Derived from input field `orderId`');
  });
});

describe('emitGenerated', () => {
  it('is deterministic and independent of input order', () => {
    const a = emitGenerated({ workflows: [refund, invoice], outDir: 'generated', existingMigrations: [] });
    const b = emitGenerated({ workflows: [invoice, refund], outDir: 'generated', existingMigrations: [] });
    expect(a).toEqual(b);
    expect(a.map((f) => f.path)).toEqual([
      'REVIEW.md',
      'contracts/invoice.v3.ts',
      'contracts/refund.v1.ts',
      'index.ts',
      'ledgerflow.manifest.json',
      'migrations/0002_invoice_v3.sql',
      'migrations/0003_refund_v1.sql',
    ]);
  });

  it('computes import paths for a nested output directory', () => {
    const files = emitGenerated({ workflows: [refund], outDir: 'src/generated', existingMigrations: [] });
    expect(files.find((f) => f.path === 'contracts/refund.v1.ts')!.content).toContain(
      "from '../../../shop/refund.workflow.js'",
    );
  });
});

describe('conditions, waits and children', () => {
  const settledEvent: EventReference = {
    name: 'payment.settled',
    exportName: 'paymentSettled',
    file: 'shop/events.ts',
    location: at(3),
  };
  const fn = (part: StepFunctionModel['part'], text: string): StepFunctionModel => ({ ...key(text), part });
  const fulfil = workflow('fulfil', 1, 'fulfil', [
    step('load', 'step', 0),
    step('vip', 'transactional', 1, { conditional: true, functions: [fn('when', '({ input }) => input.vip')] }),
    step('pause', 'sleep', 2, { key: null, functions: [fn('for', '() => 1_000')] }),
    step('settled', 'waitFor', 3, {
      key: null,
      functions: [fn('match', '({ input }) => input.orderId')],
      wait: { event: settledEvent, timeoutText: '86_400_000' },
    }),
    step('approved', 'waitFor', 4, {
      key: null,
      wait: { event: { ...settledEvent, name: 'approval.given', exportName: 'approvalGiven' }, timeoutText: null },
    }),
    step('copy', 'forEach', 5, {
      key: key('({ input, item }) => `copy:${input.orderId}:${item.from}`', { readsItem: true }),
      functions: [fn('items', '({ steps }) => steps.load.batches'), fn('childInput', '({ item }) => item')],
      fanOut: {
        workflow: { name: 'copy-batch', version: 2, exportName: 'copyBatch', file: 'shop/copy-batch.workflow.ts' },
        concurrencyText: '4',
      },
    }),
  ]);

  it('gives built-in steps an output type but no handler, and a conditional handler its own output', () => {
    const text = emitContractModule(fulfil, 'generated/contracts/fulfil.v1.ts');
    expect(text).toContain("export type FulfilPauseOutput = WorkflowOutput<typeof fulfil>['pause'];");
    expect(text).not.toMatch(/readonly (pause|settled|approved|copy):/);
    expect(text).toContain("WorkflowStepSpec<typeof fulfil, 'vip'>['output']");
    expect(text).toContain('Runs only when `` ({ input }) => input.vip `` returns true.');
    expect(text).toContain('const registration = fulfilHandlers<AppDatabase>({ load: ..., vip: ... });');
  });

  it('hashes the shape with the condition, the event and the child version, as the runtime does', () => {
    const plain = workflow(
      'fulfil',
      1,
      'fulfil',
      fulfil.steps.map((s) => ({ ...s, conditional: false })),
    );
    expect(shapeHash(plain)).not.toBe(shapeHash(fulfil));
    const parsed = parseManifest('m.json', emitManifest([fulfil], new Map()));
    if (parsed.status !== 'present') throw new Error('expected a manifest');
    const entry = parsed.manifest.workflows[0]!;
    expect(entry.steps.slice(1, 6)).toMatchObject([
      { name: 'vip', conditional: true },
      { name: 'pause' },
      { name: 'settled', event: 'payment.settled' },
      { name: 'approved', event: 'approval.given' },
      { name: 'copy', child: 'copy-batch@2' },
    ]);
    expect(entry.steps[2]).not.toHaveProperty('conditional');
  });

  it('emits one typed sender per event, importing it from its module', () => {
    const text = emitEventsModule(waitedEvents([fulfil]), 'generated/contracts/events.ts');
    expect(text).toContain("import { approvalGiven, paymentSettled } from '../../shop/events.js';");
    expect(text).toContain(
      'export function sendPaymentSettled(\n  client: EventSender,\n  key: string,\n  payload: EventSendPayload<typeof paymentSettled>,\n  options?: SendEventOptions,\n): Promise<SentEvent> {\n  return client.sendEvent(paymentSettled, key, payload, options);\n}',
    );
    expect(text.indexOf('sendApprovalGiven(')).toBeLessThan(text.indexOf('sendPaymentSettled('));
    expect(text).toContain('step "approved": a signal: `key` is the run id');
    expect(eventSenderName('order.line-item_added')).toBe('sendOrderLineItemAdded');
  });

  it('emits the senders only when some workflow waits for an event, and re-exports them from the index', () => {
    const withEvents = emitGenerated({ workflows: [fulfil], outDir: 'generated', existingMigrations: [] });
    expect(withEvents.map((f) => f.path)).toContain('contracts/events.ts');
    expect(withEvents.find((f) => f.path === 'index.ts')!.content).toContain("export * from './contracts/events.js';");
    const without = emitGenerated({ workflows: [refund], outDir: 'generated', existingMigrations: [] });
    expect(without.map((f) => f.path)).not.toContain('contracts/events.ts');
  });

  it('reviews conditions, the events waited for and the children started', () => {
    const text = emitReview([fulfil]);
    expect(text).toContain('- `vip` runs only when `({ input }) => input.vip` returns true');
    expect(text).toContain(
      '- `settled` waits for `payment.settled` (`paymentSettled` in `shop/events.ts`) with correlation key `({ input }) => input.orderId`',
    );
    expect(text).toContain('timeout `86_400_000` ms');
    expect(text).toContain(
      '- `approved` waits for `approval.given` (`approvalGiven` in `shop/events.ts`) as a signal to the run',
    );
    expect(text).toContain(
      '- `copy` starts `copy-batch` v2 (`copyBatch`) once per item of `({ steps }) => steps.load.batches`, with key `` ({ input, item }) => `copy:${input.orderId}:${item.from}` `` (reads input field `orderId` and the item); at most `4` unfinished at once',
    );
    expect(text).toContain('`vip` (transactional, conditional)');
  });
});

describe('queues', () => {
  const tenantRuns: QueueReference = {
    name: 'tenant-runs',
    exportName: 'tenantRuns',
    file: 'shop/queues.ts',
    location: at(2),
    limitsText: '{ partition: { concurrency: 1 } }',
  };
  const email: QueueReference = {
    name: 'email',
    exportName: 'emailQueue',
    file: 'shop/queues.ts',
    location: at(3),
    limitsText: null,
  };
  const base = workflow('onboard', 1, 'onboard', [
    step('profile', 'step', 0),
    step('welcome', 'external', 1, {
      idempotentByKey: true,
      queue: {
        queue: email,
        partitionKey: key('({ steps }) => steps.profile.domain', {
          inputFields: [],
          stepReads: [{ step: 'profile', path: 'domain', at: at(30), via: [] }],
        }),
        location: at(31),
      },
    }),
    step('audit', 'transactional', 2, {
      queue: {
        queue: { ...email, name: 'ledger', exportName: 'ledgerQueue', limitsText: '{\n  concurrency: 4,\n}' },
        partitionKey: null,
        location: at(32),
      },
    }),
  ]);
  const onboard: WorkflowModel = {
    ...base,
    queue: {
      queue: tenantRuns,
      partitionKey: key('({ input }) => input.tenantId', { inputFields: ['tenantId'] }),
      location: at(7),
    },
    parts: [
      ...base.parts,
      { kind: 'partitionKey', step: null, hash: 'run-partition', location: at(7) },
      { kind: 'partitionKey', step: 'welcome', hash: 'welcome-partition', location: at(31) },
    ],
  };

  it('hashes the queue names into the shape, as the runtime does', () => {
    const unqueuedSteps = onboard.steps.map(({ queue: _, ...s }) => s);
    const none = workflow('onboard', 1, 'onboard', unqueuedSteps);
    const runOnly: WorkflowModel = { ...onboard, steps: unqueuedSteps };
    // Both, the steps' only (base), the run's only, none: four shapes.
    expect(new Set([shapeHash(onboard), shapeHash(base), shapeHash(runOnly), shapeHash(none)]).size).toBe(4);
  });

  it('lists the queue names and pins the partition keys, not the queue declarations (limits), for a version that uses a queue', () => {
    const parsed = parseManifest('m.json', emitManifest([onboard], new Map()));
    if (parsed.status !== 'present') throw new Error('expected a manifest');
    const entry = parsed.manifest.workflows[0]!;
    expect(entry.partKinds).toEqual([...PART_KINDS]);
    expect(entry.partKinds).toContain('partitionKey');
    expect(entry.partKinds).not.toContain('queue');
    expect(entry.queue).toBe('tenant-runs');
    expect(entry.steps.map((s) => s.queue ?? null)).toEqual([null, 'email', 'ledger']);
    expect(entry.parts).toEqual(
      expect.objectContaining({ partitionKey: 'run-partition', 'steps.welcome.partitionKey': 'welcome-partition' }),
    );
    expect(Object.keys(entry.parts ?? {}).filter((id) => id.endsWith('queue'))).toEqual([]);
  });

  it('reviews each queue: whole run or step, limits as declared, partition key and what it reads', () => {
    const text = emitReview([onboard]);
    expect(text).toContain('### Queues');
    expect(text).toContain(
      '- Each run holds a slot of `tenant-runs` (`tenantRuns` in `shop/queues.ts`) from its first step until it finishes; ' +
        'limits `{ partition: { concurrency: 1 } }`; partition key `({ input }) => input.tenantId` (reads input field `tenantId`).',
    );
    expect(text).toContain(
      '- Each attempt of `welcome` holds a slot of `email` (`emailQueue` in `shop/queues.ts`) while it runs; no limits declared; ' +
        'partition key `({ steps }) => steps.profile.domain` (reads earlier output `profile.domain`).',
    );
    expect(text).toContain(
      '- Each attempt of `audit` holds a slot of `ledger` (`ledgerQueue` in `shop/queues.ts`) while it runs; limits `{ concurrency: 4 }`; one partition (no `partitionKey`).',
    );
    expect(emitReview([refund])).not.toContain('### Queues');
  });
});

describe('naming', () => {
  it('builds identifiers and import specifiers', () => {
    expect(pascalCase('charge_card')).toBe('ChargeCard');
    expect(pascalCase('orderPayment')).toBe('OrderPayment');
    expect(importSpecifier('generated/index.ts', 'generated/contracts/a.v1.ts')).toBe('./contracts/a.v1.js');
    expect(importSpecifier('generated/index.ts', 'a.workflow.ts')).toBe('../a.workflow.js');
  });
});
