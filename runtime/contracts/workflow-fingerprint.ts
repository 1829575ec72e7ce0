import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { AnyWorkflow } from '../../dsl/workflow.js';
import { shapeOf, type StepShape } from '../../dsl/workflow-shape.js';
import { stableJson } from '../store/stable-json.js';

/*
 * A loaded workflow version's fingerprint (below). Here, with the other checks that code matches
 * what was released (registration.ts), and below the worker and the client: the worker registers
 * the fingerprint when it starts (worker/register-fingerprints.ts), a client's start compares
 * against it (client/start-run.ts).
 */

/**
 * What a run in flight depends on that the runtime can read from a loaded definition: the shape
 * (dsl/workflow-shape.ts) and every zod schema — the input, each step's and compensation's output,
 * the payload of each event waited for — as canonical JSON Schema (`z.toJSONSchema`, both the
 * input and the output side, keys sorted). Hashed per part, so a difference names the part:
 *
 * | part | what it hashes |
 * |---|---|
 * | `workflow` | the step names in order, the workflow's queue, `compensateOnCancel` |
 * | `input` | the input schema |
 * | `steps.<step>.shape` | kind, `idempotentByKey`, condition, event name, child, queue, compensation |
 * | `steps.<step>.output` | the output schema (compensations too, under their own name) |
 * | `steps.<step>.event` | the payload schema of the event a `waitFor` waits for |
 *
 * Codegen cannot compute it (it reads source, it does not run it), so it is registered in the
 * database by the first worker that serves the version (`workflow_fingerprint`, core 0020).
 * What JSON Schema cannot express is not in it: refinements (`.refine`), the body of a
 * `transform`, `z.custom` (its JSON Schema is `{}`). Codegen's LF007 pins those by source.
 */
export interface WorkflowFingerprint {
  /** sha256 of the sorted `part=hash` lines, first 16 hex digits. */
  readonly hash: string;
  /** Hash per part id (first 16 hex digits). */
  readonly parts: Readonly<Record<string, string>>;
}

const memo = new WeakMap<object, WorkflowFingerprint>();

/** The fingerprint of a loaded workflow version (computed once per definition object). */
export function fingerprintOf(workflow: AnyWorkflow): WorkflowFingerprint {
  const known = memo.get(workflow);
  if (known !== undefined) return known;
  const shape = shapeOf(workflow);
  const parts: Record<string, string> = {
    workflow: hash(
      stableJson({
        steps: shape.steps.map((s) => s.name),
        queue: shape.queue,
        compensateOnCancel: shape.compensateOnCancel,
      }),
    ),
    input: schemaHash(workflow.input),
  };
  shape.steps.forEach((step, i) => {
    const definition = workflow.steps[i]!;
    parts[`steps.${step.name}.shape`] = hash(stableJson(stepShapeWithoutName(step)));
    parts[`steps.${step.name}.output`] = schemaHash(definition.output);
    if (definition.wait !== undefined) parts[`steps.${step.name}.event`] = schemaHash(definition.wait.event.payload);
  });
  for (const compensation of workflow.compensations) {
    parts[`steps.${compensation.name}.output`] = schemaHash(compensation.output);
  }
  const fingerprint: WorkflowFingerprint = {
    hash: hash(
      Object.keys(parts)
        .sort()
        .map((id) => `${id}=${parts[id]}`)
        .join('\n'),
    ),
    parts,
  };
  memo.set(workflow, fingerprint);
  return fingerprint;
}

/** The part ids whose hashes differ between two fingerprints (added or removed parts included), sorted. */
export function changedParts(
  registered: Readonly<Record<string, string>>,
  live: Readonly<Record<string, string>>,
): string[] {
  return [...new Set([...Object.keys(registered), ...Object.keys(live)])]
    .filter((id) => registered[id] !== live[id])
    .sort();
}

/** What changed between a registered fingerprint's parts and the live ones, in words; a new or removed step (several parts) is named once. */
export function describeChanges(
  registered: Readonly<Record<string, string>>,
  live: Readonly<Record<string, string>>,
): string[] {
  return [...new Set(changedParts(registered, live).map((id) => describeFingerprintPart(id, registered, live)))];
}

/** `the output schema of step "charge"`, `the input schema`, `step "refund" (added or removed)`. */
export function describeFingerprintPart(
  id: string,
  registered: Readonly<Record<string, string>>,
  live: Readonly<Record<string, string>>,
): string {
  const what =
    id === 'workflow'
      ? 'the step list (names, order), queue or compensateOnCancel'
      : id === 'input'
        ? 'the input schema'
        : undefined;
  if (what !== undefined) return what;
  const match = /^steps\.(.+)\.(shape|output|event)$/.exec(id);
  if (match === null) return id;
  const [, step, part] = match;
  if (registered[id] === undefined) return `step "${step}" (new: not in the registered definition)`;
  if (live[id] === undefined) return `step "${step}" (gone: the registered definition has it)`;
  const names = {
    shape: 'the kind, idempotentByKey, condition, event, child, queue or compensation',
    output: 'the output schema',
    event: 'the payload schema of the event',
  };
  return `${names[part as keyof typeof names]} of step "${step}"`;
}

function stepShapeWithoutName(step: StepShape): Omit<StepShape, 'name'> {
  const { name: _name, ...rest } = step;
  return rest;
}

function schemaHash(schema: z.ZodType): string {
  const options = { unrepresentable: 'any', cycles: 'ref', reused: 'inline' } as const;
  return hash(
    stableJson({
      input: sortRequired(z.toJSONSchema(schema, { ...options, io: 'input' })),
      output: sortRequired(z.toJSONSchema(schema, { ...options, io: 'output' })),
    }),
  );
}

/** `required` lists follow declaration order, which validation does not depend on: sorted, as stableJson sorts keys. */
function sortRequired(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortRequired);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, v]) => [
      key,
      key === 'required' && Array.isArray(v) ? [...(v as string[])].sort() : sortRequired(v),
    ]),
  );
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}
