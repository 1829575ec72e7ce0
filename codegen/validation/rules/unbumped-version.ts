import { shapeHash } from '../../../dsl/workflow-shape.js';
import type { Diagnostic } from '../../model/diagnostic.js';
import type { CommittedManifest, ManifestCompensation, ManifestWorkflow } from '../../model/manifest.js';
import {
  describePart,
  describePartKinds,
  PART_KINDS,
  partId,
  QUEUE_PARTS,
  SHAPE_BOUND_PART_KINDS,
  STEP_PART_KINDS,
  WORKFLOW_PART_KINDS,
  type PinnedPart,
} from '../../model/pinned-parts.js';
import { describeLocation, type SourceLocation } from '../../model/source-location.js';
import { stepsAndCompensations, type CompensationModel, type WorkflowModel } from '../../model/workflow-model.js';
import type { Rule } from '../rule.js';

/**
 * LF007: a released workflow version that the committed manifest already knows must stay as it was
 * generated (a draft, `"draft": true` in its entry, may change until `codegen --release`) — everything a run in flight depends on (codegen/model/pinned-parts.ts): its shape
 * (step names, kinds, order, `idempotentByKey`, conditions, the events waited for, the child
 * workflow versions started, the queues its runs and steps hold slots of, the steps'
 * compensations and `compensateOnCancel`) and its pinned parts (a compensation's under its name)
 * (input schema, output schemas, keys, requests, conditions, sleep times, correlation keys, item
 * lists, child inputs, events, wait timeouts, concurrency, partition keys — not a queue's limits).
 * Runs are pinned to a version; changing any of it under them would resume a run with an input it
 * does not have, an output it did not produce, or a key other than the one its ledger row holds.
 *
 * No change counts as compatible: parts are compared by source text (comments and formatting
 * aside, with the declarations they use), and codegen cannot prove two different texts mean the
 * same. A part kind the manifest entry does not pin yet (a manifest from an earlier release) is
 * not compared; `unpinnedPartNotes` says so.
 *
 * One diagnostic per version, at what changed: the first changed declaration (the key, request,
 * condition or schema property; the step for a change of kind, queue or compensation), or, for a
 * key whose own text is as the manifest recorded it, the declaration it uses (a helper, here or in
 * another file); at `version` only when nothing is left to point at (a removed step, a reorder).
 * The other changes in the message each say where they are.
 */
export const unbumpedVersion: Rule = ({ analysis, committedManifest }) => {
  if (committedManifest.status === 'absent') return [];
  if (committedManifest.status === 'invalid') {
    return [
      {
        code: 'LF007',
        severity: 'error',
        file: committedManifest.file,
        line: 1,
        col: 1,
        message: `cannot read the committed manifest: ${committedManifest.error}; restore it from version control (it is how codegen detects changed workflow versions).`,
      },
    ];
  }
  const diagnostics: Diagnostic[] = [];
  const entries = committedManifest.manifest.workflows;
  for (const workflow of analysis.workflows) {
    const committed = entries.find((e) => e.name === workflow.name && e.version === workflow.version);
    // A draft changes freely until it is released (`codegen --release`): nothing is pinned yet.
    if (committed === undefined || committed.draft === true) continue;
    const changes = [
      ...(committed.definitionHash === shapeHash(workflow) ? [] : shapeChanges(committed, workflow)),
      ...partChanges(committed, workflow),
    ];
    if (changes.length === 0) continue;
    // Point at the first change that has a place of its own (the changed declaration), else at `version`.
    const at = changes.find((c) => c.at !== null)?.at ?? workflow.versionLocation;
    const listed = changes.map((c) =>
      c.at === null || c.at === at ? c.text : `${c.text} (${describeLocation(c.at, at)})`,
    );
    const highest = Math.max(
      workflow.version,
      ...entries.filter((e) => e.name === workflow.name).map((e) => e.version),
      ...analysis.workflows.filter((w) => w.name === workflow.name).map((w) => w.version),
    );
    const v = workflow.version;
    diagnostics.push({
      code: 'LF007',
      severity: 'error',
      ...at,
      message:
        `workflow "${workflow.name}" v${v} changed since it was generated: ${listed.join('; ')}. ` +
        `Runs of v${v} in flight depend on it as generated, and codegen counts no change as compatible ` +
        '(it compares source text, comments and formatting aside, with the declarations it uses): ' +
        `set version: ${highest + 1} and keep v${v} declared until its runs finish (see LF009), or revert the change.`,
    });
  }
  return diagnostics;
};

/**
 * Notes (not errors) for declared versions whose manifest entry does not pin every part kind yet
 * — written by an earlier ledgerflow: those parts are pinned from this run on, as declared now.
 * One note per set of missing kinds, naming the versions. Kinds bound to the shape
 * (SHAPE_BOUND_PART_KINDS) are left out: an entry written before they existed had none.
 */
export function unpinnedPartNotes(workflows: readonly WorkflowModel[], committedManifest: CommittedManifest): string[] {
  if (committedManifest.status !== 'present') return [];
  const versionsByMissing = new Map<string, string[]>();
  for (const workflow of [...workflows].sort((a, b) =>
    a.name < b.name ? -1 : a.name > b.name ? 1 : a.version - b.version,
  )) {
    const committed = committedManifest.manifest.workflows.find(
      (e) => e.name === workflow.name && e.version === workflow.version,
    );
    if (committed === undefined) continue;
    const unpinned = PART_KINDS.filter(
      (kind) => !(committed.partKinds ?? []).includes(kind) && !SHAPE_BOUND_PART_KINDS.includes(kind),
    );
    if (unpinned.length === 0) continue;
    const key = describePartKinds(unpinned);
    versionsByMissing.set(key, [...(versionsByMissing.get(key) ?? []), `"${workflow.name}" v${workflow.version}`]);
  }
  return [...versionsByMissing].map(
    ([parts, versions]) =>
      `${committedManifest.file} comes from an earlier ledgerflow and does not pin ${parts} of ${versions.join(', ')}; ` +
      'they are pinned as declared now, so from here on a change to them is LF007 (one made before cannot be told) — run codegen and commit the manifest it writes.',
  );
}

/** What changed, and the declaration that changed (null: none left to point at, e.g. a removed step). */
interface Change {
  readonly text: string;
  readonly at: SourceLocation | null;
}

/**
 * The pinned parts whose hash differs from the manifest's: the workflow's own, then per step (in
 * step order) its output, functions and queue use — each at its declaration, or, for a key whose
 * own text the manifest shows unchanged, at the declaration it uses that changed (helperChange).
 */
function partChanges(committed: ManifestWorkflow, workflow: WorkflowModel): Change[] {
  const pinned = new Set(committed.partKinds ?? []);
  const before = committed.parts ?? {};
  const now = new Map(workflow.parts.map((part) => [partId(part), part]));
  const candidates: Pick<PinnedPart, 'kind' | 'step'>[] = [];
  for (const kind of WORKFLOW_PART_KINDS) {
    if (pinned.has(kind)) candidates.push({ kind, step: null });
  }
  for (const step of workflow.steps) {
    const old = committed.steps.find((s) => s.name === step.name);
    if (old === undefined) continue; // an added step is a shape change
    for (const kind of STEP_PART_KINDS) {
      if (pinned.has(kind)) candidates.push({ kind, step: step.name });
    }
    // A compensation added, removed or renamed is a shape change; one kept has its parts compared.
    const compensation = step.compensation?.name;
    if (compensation === undefined || old.compensation?.name !== compensation) continue;
    for (const kind of STEP_PART_KINDS) {
      if (pinned.has(kind)) candidates.push({ kind, step: compensation });
    }
  }
  const hashBefore = (part: Pick<PinnedPart, 'kind' | 'step'>): string | undefined => {
    const id = partId(part);
    return Object.hasOwn(before, id) ? before[id] : undefined;
  };
  const changes: Change[] = [];
  for (const part of candidates) {
    const old = hashBefore(part);
    const declared = now.get(partId(part));
    const current = declared?.hash;
    if (old === current) continue;
    // A condition added or removed changes the shape, which says so (shapeChanges); so does a queue
    // use, and with it its partition key.
    if (part.kind === 'when' && (old === undefined || current === undefined)) continue;
    if (
      (QUEUE_PARTS as readonly string[]).includes(part.kind) &&
      queueUseAddedOrRemoved(committed, workflow, part.step)
    )
      continue;
    const what = describePart(part, workflow.steps.find((s) => s.compensation?.name === part.step)?.name);
    if (declared === undefined) {
      changes.push({
        text: `${what} was removed`,
        at: stepsAndCompensations(workflow).find((s) => s.name === part.step)?.location ?? null,
      });
    } else if (old === undefined) {
      changes.push({ text: `${what} was added`, at: declared.location });
    } else {
      changes.push(
        helperChange(committed, workflow, declared, what) ?? { text: `${what} changed`, at: declared.location },
      );
    }
  }
  return changes;
}

/**
 * A key whose text is as the manifest recorded it but whose pin differs changed in a declaration
 * it uses (a helper, a constant, here or in another file): point there. The manifest records a
 * key's text, not the texts of what it uses, so with several such declarations the change is in
 * one of them — the message names them all, the diagnostic points at the first in another file
 * (or the first). Null when this cannot be told (not a key, its text changed, nothing used).
 */
function helperChange(
  committed: ManifestWorkflow,
  workflow: WorkflowModel,
  part: PinnedPart,
  what: string,
): Change | null {
  if (part.kind !== 'key' || part.step === null || part.uses === undefined || part.uses.length === 0) return null;
  const name = part.step;
  const step = stepsAndCompensations(workflow).find((s) => s.name === name);
  const recorded =
    committed.steps.find((s) => s.name === name)?.key ??
    committed.steps.find((s) => s.compensation?.name === name)?.compensation?.key;
  if (step?.key == null || typeof recorded !== 'string' || squeezed(recorded) !== squeezed(step.key.text)) return null;
  const at = part.uses.find((use) => use.file !== part.location.file) ?? part.uses[0]!;
  const places = part.uses.map((use) => describeLocation(use, at));
  return {
    text:
      `${what} changed in ${part.uses.length === 1 ? 'a declaration it uses' : 'one of the declarations it uses'} (${places.join(', ')}), ` +
      `not in its own text (${describeLocation(part.location, at)})`,
    at,
  };
}

function squeezed(text: string): string {
  return text.replace(/\s+/g, '');
}

/** Whether the workflow's runs (step null) or a step's attempts hold a queue's slot now but did not, or the reverse. */
function queueUseAddedOrRemoved(committed: ManifestWorkflow, workflow: WorkflowModel, step: string | null): boolean {
  const before = step === null ? committed.queue : committed.steps.find((s) => s.name === step)?.queue;
  const after = step === null ? workflow.queue : workflow.steps.find((s) => s.name === step)?.queue;
  return (before === undefined) !== (after === undefined);
}

/**
 * What differs in the shape: the workflow's queue, then removed and added steps, kinds,
 * `idempotentByKey`, conditions, events, children, queues, order — each at the step it is about
 * (null for a step that is gone or a change of the whole list).
 */
function shapeChanges(committed: ManifestWorkflow, workflow: WorkflowModel): Change[] {
  const before = committed.steps;
  const after = workflow.steps;
  const changes: Change[] = [];
  const runQueue = queueChange(committed.queue, workflow.queue?.queue.name);
  if (runQueue !== null)
    changes.push({ text: `the workflow's runs ${runQueue}`, at: workflow.queue?.location ?? null });
  for (const old of before) {
    const now = after.find((s) => s.name === old.name);
    if (now === undefined) {
      changes.push({ text: `step "${old.name}" was removed`, at: null });
      continue;
    }
    const add = (text: string, at: SourceLocation | null = now.location): void => void changes.push({ text, at });
    if (now.kind !== old.kind) add(`the kind of step "${old.name}" changed (${old.kind} → ${now.kind})`);
    if (now.idempotentByKey !== old.idempotentByKey) {
      add(`idempotentByKey of step "${old.name}" changed (${old.idempotentByKey} → ${now.idempotentByKey})`);
    }
    if (now.conditional !== (old.conditional === true)) {
      add(
        now.conditional
          ? `step "${old.name}" got a condition (when)`
          : `the condition (when) of step "${old.name}" was removed`,
      );
    }
    const event = now.wait?.event.name;
    if (now.kind === old.kind && event !== old.event)
      add(
        `step "${old.name}" waits for another event (${old.event} → ${event})`,
        now.wait?.event.location ?? now.location,
      );
    const child = now.fanOut === undefined ? undefined : `${now.fanOut.workflow.name}@${now.fanOut.workflow.version}`;
    if (now.kind === old.kind && child !== old.child)
      add(`step "${old.name}" starts another child workflow (${old.child} → ${child})`);
    const stepQueue = queueChange(old.queue, now.queue?.queue.name);
    if (stepQueue !== null) add(`the attempts of step "${old.name}" ${stepQueue}`, now.queue?.location ?? now.location);
    const undo = compensationChange(old.compensation, now.compensation);
    if (undo !== null) add(`step "${old.name}" ${undo}`, now.compensation?.location ?? now.location);
  }
  if ((committed.compensateOnCancel === true) !== (workflow.compensateOnCancel === true)) {
    changes.push({
      text: `compensateOnCancel changed (${committed.compensateOnCancel === true} → ${workflow.compensateOnCancel === true})`,
      at: null,
    });
  }
  for (const now of after) {
    if (!before.some((s) => s.name === now.name))
      changes.push({ text: `${now.kind} step "${now.name}" was added`, at: now.location });
  }
  const order = (steps: readonly { name: string }[]): string => steps.map((s) => s.name).join(',');
  const common = new Set(after.map((s) => s.name));
  const oldOrder = order(before.filter((s) => common.has(s.name)));
  const newOrder = order(after.filter((s) => before.some((o) => o.name === s.name)));
  if (oldOrder !== newOrder) {
    changes.push({
      text: `the steps were reordered (${before.map((s) => s.name).join(' → ')} is now ${after.map((s) => s.name).join(' → ')})`,
      at: null,
    });
  }
  return changes.length > 0
    ? changes
    : [{ text: 'the shape of its steps changed (its definition hash differs)', at: null }];
}

/** `got a compensation ("refund")`, `lost …`, `is compensated by another (a → b)`, idempotentByKey; null when unchanged. */
function compensationChange(
  before: ManifestCompensation | undefined,
  after: CompensationModel | undefined,
): string | null {
  if (before === undefined && after === undefined) return null;
  if (before === undefined) return `got a compensation ("${after!.name}")`;
  if (after === undefined) return `no longer has its compensation ("${before.name}")`;
  if (before.name !== after.name) return `is compensated by another (${before.name} → ${after.name})`;
  if (before.idempotentByKey !== after.idempotentByKey) {
    return `changed idempotentByKey of its compensation "${after.name}" (${before.idempotentByKey} → ${after.idempotentByKey})`;
  }
  return null;
}

/** `now hold a slot of queue "email"`, `no longer …`, `hold a slot of another queue (a → b)`; null when unchanged. */
function queueChange(before: string | undefined, after: string | undefined): string | null {
  if (before === after) return null;
  if (before === undefined) return `now hold a slot of queue "${after}"`;
  if (after === undefined) return `no longer hold a slot of queue "${before}"`;
  return `hold a slot of another queue (${before} → ${after})`;
}
