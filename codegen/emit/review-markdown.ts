import { isEffectKind, type EffectStepKind } from '../../dsl/step-kind.js';
import { DEFAULT_PERFORM_TIMEOUT_MS } from '../../dsl/step-options.js';
import { shapeHash } from '../../dsl/workflow-shape.js';
import type { FunctionModel, KeyModel, QueueUseModel, StepModel, WorkflowModel } from '../model/workflow-model.js';
import type { Suppression } from '../model/suppression.js';
import { DO_NOT_EDIT } from './generated-file.js';
import { compareWorkflows } from './naming.js';

/**
 * `REVIEW.md`: for every effect step, the four review questions (DESIGN.md "Codegen") answered from
 * what codegen knows about it — its key and what the key derives from, the commit that writes
 * the effect with the transition, what a crash between the call and the ledger write does,
 * and who reconciles. Per workflow also, where it has them: the conditions of its conditional
 * steps, the events it waits for, the child workflows it starts and the queues its runs or steps
 * hold slots of. In a workflow with compensations, each effect step says what undoes it, under
 * which key, and who reconciles the undo.
 */
export function emitReview(
  workflows: readonly WorkflowModel[],
  suppressions: readonly Suppression[] = [],
  drafts: ReadonlySet<string> = new Set(),
): string {
  const out: string[] = [
    '# Effect review',
    '',
    `<!-- ${DO_NOT_EDIT} Regenerate with \`npx ledgerflow codegen\`. -->`,
    '',
    'For every `transactional` and `external` step: (1) the key and why it is stable, (2) the transaction',
    'that writes the effect and the state transition, (3) what a crash between the call and the ledger',
    "write does, (4) who reconciles and how the gap is found. Every key below passed codegen's checks: it",
    'reads no clock, randomness, environment, I/O or mutable module state (LF002, LF004) and only steps',
    'declared before its own (LF003).',
  ];
  const sorted = [...workflows].sort(compareWorkflows);
  if (sorted.length === 0) out.push('', '_No workflows found._');
  for (const workflow of sorted) {
    out.push(
      '',
      `## ${workflow.name} v${workflow.version}`,
      '',
      `Source: \`${workflow.file}\` (\`${workflow.exportName}\`), definition hash \`${shapeHash(workflow)}\`.`,
      `Steps: ${workflow.steps.map((s) => `\`${s.name}\` (${describeKind(s)})`).join(' → ') || '_none_'}.`,
      drafts.has(`${workflow.name}@${workflow.version}`)
        ? `Status: **draft** — it may still change without a version bump; release it (\`ledgerflow codegen --release ${workflow.name}@${workflow.version}\`) before it runs anywhere that matters.`
        : 'Status: released — any change to it needs a new version (LF007).',
    );
    out.push(...conditions(workflow), ...waits(workflow), ...children(workflow), ...queues(workflow));
    const effects = workflow.steps.filter((s) => isEffectKind(s.kind));
    if (effects.length === 0) out.push('', "No effect steps: nothing here writes outside the run's own state.");
    const compensates = effects.some((s) => s.compensation !== undefined);
    for (const step of effects) {
      out.push(
        '',
        ...reviewStep(workflow, step, step.kind as EffectStepKind),
        ...(compensates ? [compensationReview(workflow, step)] : []),
      );
    }
  }
  out.push(...suppressionSection(suppressions));
  return `${out.join('\n')}\n`;
}

/**
 * Every `// ledgerflow-ignore` comment in effect, so that an escape hatch is reviewed like a key:
 * where it is, what it suppresses, in which step, and why. Absent when there is none.
 */
function suppressionSection(suppressions: readonly Suppression[]): string[] {
  if (suppressions.length === 0) return [];
  return [
    '',
    '## Suppressed diagnostics',
    '',
    'Each `// ledgerflow-ignore` comment below took a diagnostic out of the report: check that its reason holds.',
    '',
    '| where | code | step | reason |',
    '|---|---|---|---|',
    ...suppressions.map(
      (s) => `| \`${s.location.file}:${s.location.line}\` | ${s.code} | ${cell(s.step ?? '—')} | ${cell(s.reason)} |`,
    ),
  ];
}

/** Text in a table cell: a pipe would end the cell. */
function cell(text: string): string {
  return text.replaceAll('|', '\\|');
}

function describeKind(step: StepModel): string {
  return [
    step.kind,
    ...(step.idempotentByKey ? ['idempotentByKey'] : []),
    ...(step.conditional ? ['conditional'] : []),
  ].join(', ');
}

function conditions(workflow: WorkflowModel): string[] {
  const conditional = workflow.steps.flatMap((step) => {
    const when = step.functions.find((f) => f.part === 'when');
    return when === undefined ? [] : [{ step, when }];
  });
  if (conditional.length === 0) return [];
  return [
    '',
    '### Conditions',
    '',
    'A skipped step does not run: no handler call, no wait, no child, no ledger row; later steps see its output as `undefined`.',
    '',
    ...conditional.map(
      ({ step, when }) => `- \`${step.name}\` runs only when ${code(when.text)} returns true (${derivation(when)}).`,
    ),
  ];
}

function waits(workflow: WorkflowModel): string[] {
  const waiting = workflow.steps.flatMap((step) => (step.wait === undefined ? [] : [{ step, wait: step.wait }]));
  if (waiting.length === 0) return [];
  return [
    '',
    '### Events waited for',
    '',
    'Each event is taken by one waiting step, once, in the commit that completes the step; an event sent before the run gets there waits for it.',
    '',
    ...waiting.map(({ step, wait }) => {
      const event = `\`${wait.event.name}\` (\`${wait.event.exportName}\` in \`${wait.event.file}\`)`;
      const match = step.functions.find((f) => f.part === 'match');
      const key =
        match === undefined
          ? 'as a signal to the run: the correlation key is the run id (no `match`)'
          : `with correlation key ${code(match.text)} (${derivation(match)})`;
      const timeout =
        wait.timeoutText === null
          ? 'no timeout: the run waits until the event comes'
          : `timeout \`${wait.timeoutText}\` ms from when the run reaches the step, after which its output is \`{ status: 'timeout' }\``;
      return `- \`${step.name}\` waits for ${event} ${key}; ${timeout}.`;
    }),
  ];
}

function children(workflow: WorkflowModel): string[] {
  const starting = workflow.steps.flatMap((step) => (step.fanOut === undefined ? [] : [{ step, fanOut: step.fanOut }]));
  if (starting.length === 0) return [];
  return [
    '',
    '### Children started',
    '',
    'Each child run is started once per key, whatever crashes in between, and the step takes its output when it finishes; ' +
      'a failed or cancelled child fails the step, and cancelling this run cancels its children.',
    '',
    ...starting.map(({ step, fanOut }) => {
      const child = `\`${fanOut.workflow.name}\` v${fanOut.workflow.version} (\`${fanOut.workflow.exportName}\`)`;
      const key = step.key === null ? '_no key (LF001)_' : `${code(step.key.text)} (${derivation(step.key)})`;
      if (step.kind !== 'forEach') return `- \`${step.name}\` starts ${child} once, with key ${key}.`;
      const items = step.functions.find((f) => f.part === 'items');
      const concurrency =
        fanOut.concurrencyText === null
          ? 'all of them may be unfinished at once'
          : `at most \`${fanOut.concurrencyText}\` unfinished at once (concurrency)`;
      return `- \`${step.name}\` starts ${child} once per item of ${items === undefined ? 'its items' : code(items.text)}, with key ${key}; ${concurrency}.`;
    }),
  ];
}

function queues(workflow: WorkflowModel): string[] {
  const run = workflow.queue;
  const steps = workflow.steps.flatMap((step) => (step.queue === undefined ? [] : [{ step, use: step.queue }]));
  if (run === undefined && steps.length === 0) return [];
  const how = [
    ...(run === undefined
      ? []
      : ["The run's slot is asked for before its first step and given back when the run finishes."]),
    ...(steps.length === 0
      ? []
      : ["A step's slot is asked for before each attempt (after its condition) and given back when the attempt ends."]),
    'While no slot is free the run waits in line (`waiting`), and a freed slot wakes it. ' +
      'The limits hold across all workers; slots go by priority, then round-robin between partitions.',
  ];
  return [
    '',
    '### Queues',
    '',
    how.join(' '),
    '',
    ...(run === undefined
      ? []
      : [
          `- Each run holds a slot of ${describeQueue(run)} from its first step until it finishes; ${limits(run)}; ${partition(run)}.`,
        ]),
    ...steps.map(
      ({ step, use }) =>
        `- Each attempt of \`${step.name}\` holds a slot of ${describeQueue(use)} while it runs; ${limits(use)}; ${partition(use)}.`,
    ),
  ];
}

function describeQueue(use: QueueUseModel): string {
  return `\`${use.queue.name}\` (\`${use.queue.exportName}\` in \`${use.queue.file}\`)`;
}

function limits(use: QueueUseModel): string {
  // On one line, a trailing comma before a closing brace reads as a typo.
  return use.queue.limitsText === null
    ? 'no limits declared'
    : `limits ${code(use.queue.limitsText.replace(/,(\s*[}\]])/g, '$1'))}`;
}

function partition(use: QueueUseModel): string {
  const key = use.partitionKey;
  return key === null ? 'one partition (no `partitionKey`)' : `partition key ${code(key.text)} (${derivation(key)})`;
}

/** What a function reads, for the review: `input field \`orderId\` and item`, `nothing of its context`. */
function derivation(fn: FunctionModel): string {
  const reads: string[] = [];
  if (fn.readsWholeInput) reads.push('the whole input');
  else if (fn.inputFields.length > 0)
    reads.push(
      `input ${plural(fn.inputFields.length, 'field', 'fields')} ${fn.inputFields.map((f) => `\`${f}\``).join(', ')}`,
    );
  if (fn.readsAllSteps) reads.push('all earlier steps');
  else {
    const fields = [...new Set(fn.stepReads.map((r) => `\`${r.step}${r.path === '' ? '' : `.${r.path}`}\``))];
    if (fields.length > 0) reads.push(`earlier ${plural(fields.length, 'output', 'outputs')} ${fields.join(', ')}`);
  }
  if (fn.readsItem) reads.push('the item');
  return reads.length === 0 ? 'reads nothing of its context' : `reads ${reads.join(' and ')}`;
}

/** Source text as an inline code span on one line, fenced with more backticks than it contains. */
function code(text: string): string {
  const single = text.replace(/\s+/g, ' ');
  const longest = Math.max(0, ...(single.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longest + 1);
  return longest === 0 ? `${fence}${single}${fence}` : `${fence} ${single} ${fence}`;
}

function reviewStep(workflow: WorkflowModel, step: StepModel, kind: EffectStepKind): string[] {
  const key = step.key;
  return [
    `### \`${step.name}\` — ${describeKind(step)}`,
    '',
    `Declared at \`${step.location.file}:${step.location.line}\`.`,
    '',
    '1. **Key and why it is stable.**',
    ...(key === null
      ? ['   _No key (LF001)._']
      : [
          '',
          '   ```ts',
          ...key.text.split('\n').map((l) => `   ${l}`),
          '   ```',
          '',
          `   ${stability(workflow, step, key)}`,
        ]),
    `   ${requestHash(step)}`,
    `2. **Transaction that writes the effect and the transition.** ${TRANSACTION[kind]}`,
    `3. **Crash between the call and the ledger write.** ${crash(step, kind)}`,
    `4. **Who reconciles and how the gap is found.** ${reconciliation(step, kind)}`,
  ];
}

function stability(workflow: WorkflowModel, step: StepModel, key: KeyModel): string {
  const sources: string[] = [];
  if (key.readsWholeInput) sources.push('the whole workflow input');
  else if (key.inputFields.length > 0)
    sources.push(
      `input ${plural(key.inputFields.length, 'field', 'fields')} ${key.inputFields.map((f) => `\`${f}\``).join(', ')}`,
    );
  const readSteps = [...new Set(key.stepReads.map((r) => r.step))];
  if (key.readsAllSteps) sources.push('the outputs of all earlier steps');
  else if (readSteps.length > 0) {
    const fields = key.stepReads.map((r) => `\`${r.step}${r.path === '' ? '' : `.${r.path}`}\``);
    sources.push(
      `the ${plural(readSteps.length, 'output', 'outputs')} of earlier ${plural(readSteps.length, 'step', 'steps')} (${[...new Set(fields)].join(', ')})`,
    );
  }
  if (sources.length === 0) {
    return (
      '**Warning (LF005): this key is constant** — it reads neither the input nor earlier steps, so every run ' +
      `of "${workflow.name}" shares it and only the first run's effect happens.`
    );
  }
  const persisted = [
    ...(key.readsWholeInput || key.inputFields.length > 0 ? ['the input is stored with the run when it starts'] : []),
    ...(key.readsAllSteps || readSteps.length > 0
      ? [`earlier outputs are checkpointed before "${step.name}" first runs`]
      : []),
  ];
  const calls = key.calls.length === 0 ? '' : ` It calls only ${key.calls.map((c) => `\`${c}\``).join(', ')}.`;
  return (
    `Derived from ${sources.join(' and ')}; ${persisted.join(' and ')}, so every attempt, worker and restart ` +
    `computes the same key.${calls}`
  );
}

function requestHash(step: StepModel): string {
  const what = step.hasRequest ? "the step's `request(...)`" : 'the key context (no `request` declared)';
  return `The ledger row also stores a hash of ${what}: a retry under the same key with a different request is a conflict that fails the run, never an overwrite.`;
}

const TRANSACTION: Record<EffectStepKind, string> = {
  transactional:
    "One commit, fenced by the run's `fencing_token`: the handler's writes through `ctx.tx`, the ledger row in " +
    '`ledgerflow.step_effect` (key, request hash, status `recorded`), the `step_result` row (whose foreign key requires ' +
    "that recorded ledger row), the `step_attempt` row and the run's transition in `workflow_run`. The contract " +
    '(`TransactionalHandler`) only accepts `return ctx.record(output)`, so the handler cannot complete without that commit.',
  external:
    'Two commits around the call. The intent commit inserts the ledger row with status `intent` ' +
    '(`INSERT … ON CONFLICT DO NOTHING` on `(workflow_id, step_name, idempotency_key)`) with the attempt record; ' +
    'then `perform({ key })` calls the provider; the result commit, fenced by `fencing_token`, sets the ledger row to ' +
    "`recorded` and writes `step_result` (its foreign key requires the recorded row), `step_attempt` and the run's transition.",
};

function performTimeout(step: StepModel): string {
  return step.performTimeoutText === null
    ? `the default perform timeout (${DEFAULT_PERFORM_TIMEOUT_MS / 1000} s)`
    : `its perform timeout (\`performTimeoutMs: ${step.performTimeoutText}\`)`;
}

function crash(step: StepModel, kind: EffectStepKind): string {
  if (kind === 'transactional') {
    return (
      'There is no gap: the effect and its ledger row commit together or not at all. A crash before COMMIT rolls both ' +
      'back; when the lease expires the step runs again under the same key. A connection lost during COMMIT leaves the ' +
      'outcome unknown, so the next attempt re-reads the ledger under the key before acting.'
    );
  }
  const unknown =
    'A `perform` that did not return (it threw, or ran past its timeout) counts the same: its outcome is unknown, ' +
    'unless it threw `NotAppliedError` (the provider refused the request), which releases the intent at once.';
  if (step.idempotentByKey) {
    return (
      'The ledger row stays `intent`. Because the provider dedupes by key (`idempotentByKey: true`), the step is ' +
      'performed again with the same key by the next attempt, and the provider returns the first effect instead of ' +
      `applying a second. ${unknown} A perform still running after ${performTimeout(step)} is given up.`
    );
  }
  return (
    'The ledger row stays `intent` and the step is never performed again blindly: the provider does not dedupe, so the ' +
    'contract (`ReconcilingExternalHandler`) requires a `reconcile({ key, intent })` that looks the effect up at the ' +
    `provider by key, after the intent's horizon: its time + the worker's lease + ${performTimeout(step)}, stored on the ` +
    `intent. ${unknown} The handler's own client timeout must end within the perform timeout.`
  );
}

function reconciliation(step: StepModel, kind: EffectStepKind): string {
  if (kind === 'transactional') {
    return (
      'Nobody needs to: a transactional step leaves no intent behind. A run whose worker died is claimed again ' +
      'after its lease expires (`FOR UPDATE SKIP LOCKED`, fencing token bumped) and the new attempt finds the ledger ' +
      'row if the first one committed.'
    );
  }
  const scan =
    'The reconciler claims `ledgerflow.step_effect` rows with status `intent` whose horizon (`reconcile_after`) has passed ' +
    'by the database clock (index `step_effect_open_intent_idx`), one lookup per intent across all workers';
  const outcomes =
    '`found` records the output and advances the run; `not_found` releases the intent and the step retries with the same key; ' +
    '`unknown` parks the run in `needs_reconciliation` for an operator — visible, never retried blindly — and the intent is ' +
    'asked again after a backoff. Intents of cancelled or failed runs are settled the same way, in the ledger only.';
  if (step.idempotentByKey) {
    return (
      `${scan}. If the handler supplies the optional \`reconcile\`, it is asked first: ${outcomes} ` +
      'Without it, the intent is released and the step retries with the same key, which the provider dedupes.'
    );
  }
  return `${scan} and calls the handler's \`reconcile\`: ${outcomes}`;
}

/** Item 5 of an effect step in a workflow with compensations: what undoes it, under which key, who reconciles the undo. */
function compensationReview(workflow: WorkflowModel, step: StepModel): string {
  const undo = step.compensation;
  if (undo === undefined && workflow.steps.at(-1) === step) {
    return "5. **Compensation.** _None needed_: recording this last step's effect completes the run, so nothing after it can fail and start compensating.";
  }
  if (undo === undefined) {
    return (
      '5. **Compensation.** _None (LF015)_: when a run fails for good or is cancelled with `compensate`, the effects of ' +
      `${workflow.steps
        .filter((s) => s.compensation !== undefined)
        .map((s) => `\`${s.name}\``)
        .join(', ')} are undone and this one stays.`
    );
  }
  const key = undo.key === null ? '_no key (LF001)_' : `${code(undo.key.text)} (${derivation(undo.key)})`;
  const who =
    undo.kind === 'transactional'
      ? 'nobody needs to: a transactional compensation writes through `ctx.tx` in one commit with its ledger row, so it leaves no intent behind'
      : undo.idempotentByKey
        ? 'the provider dedupes by its key (`idempotentByKey: true`): an intent left by a crash is performed again under the same key (a `reconcile`, if the handler has one, is asked first)'
        : "the handler's `reconcile`, asked by the reconciler after the intent's horizon, looks the undo up at the provider by its key";
  return (
    `5. **Compensation.** Undone by \`${undo.name}\` (${describeKind(undo)}) under key ${key}, once, only if this step's effect is ` +
    'recorded, when the run fails for good or is cancelled with `compensate` — after the compensations of later steps. ' +
    `Who reconciles it: ${who}.`
  );
}

function plural(count: number, one: string, many: string): string {
  return count === 1 ? one : many;
}
