// Reading a queue use — `queue: { queue, partitionKey }` in a workflow's options (each run holds a
// slot from its first step until it finishes) or in the config of a `step`, `transactional` or
// `external` step (each attempt holds one): the queue it names, resolved to its `queue(...)`
// declaration, and the partition key, checked for purity like a key. The queue's name is in the
// shape and the partition key is pinned (LF007); the queue's limits are not (pinned-parts.ts).

import { ts } from 'ts-morph';
import { describePartitionKey, type PinnedPart } from '../model/pinned-parts.js';
import type { ContextDescription } from '../model/purity.js';
import type { FunctionModel, MalformedDeclaration, QueueUseModel } from '../model/workflow-model.js';
import type { AnalysisProgram } from './analysis-program.js';
import { readQueueReference } from './dsl-declarations.js';
import { functionModel } from './function-model.js';
import { pinPart, resolveFunction, assignedValue } from './property-values.js';
import type { PurityAnalyzer } from './purity-analyzer.js';
import { propertyName, skipWrappers } from './syntax.js';

/** Who holds the slots of a queue use: a step's attempts, or (step null) the workflow's runs. */
export interface QueueHolder {
  readonly workflow: string;
  readonly step: string | null;
  /** What the partition key's context offers: the step's key context, or the run's input alone. */
  readonly context: ContextDescription;
}

const QUEUE_EXAMPLE =
  "emailQueue, the const of a queue declared with export const emailQueue = queue('email', { concurrency: 5 })";

/**
 * Reads the queue use a `queue` property declares, with the part it pins: the partition key, when
 * there is one. Anything codegen cannot read is reported as
 * malformed (LF008) with what to write instead; the result is then null.
 */
export function readQueueUse(
  program: AnalysisProgram,
  analyzer: PurityAnalyzer,
  property: ts.ObjectLiteralElementLike,
  holder: QueueHolder,
  malformed: MalformedDeclaration[],
): { use: QueueUseModel; parts: PinnedPart[] } | null {
  const report = (node: ts.Node, message: string): null => {
    malformed.push({ location: program.location(node), message });
    return null;
  };
  const owner = holder.step === null ? `workflow "${holder.workflow}"` : `step "${holder.step}"`;
  const example = holder.step === null ? '({ input }) => input.customerId' : '({ input, steps }) => input.customerId';
  const value = assignedValue(property);
  const use = value === null ? null : skipWrappers(value);
  if (use === null || !ts.isObjectLiteralExpression(use)) {
    return report(
      property,
      `the queue of ${owner} must be an object literal, e.g. queue: { queue: emailQueue, partitionKey: ${example} }, ` +
        'so that codegen can read which queue it is and check its partition key.',
    );
  }
  const properties = new Map<string, ts.ObjectLiteralElementLike>();
  for (const element of use.properties) {
    if (ts.isSpreadAssignment(element)) {
      return report(
        element,
        `the queue of ${owner} uses a spread; write queue and partitionKey out so codegen can see them.`,
      );
    }
    const name = propertyName(element);
    if (name !== null) properties.set(name, element);
  }

  const queueProperty = properties.get('queue');
  if (queueProperty === undefined)
    return report(property, `the queue of ${owner} names no queue; add queue: ${QUEUE_EXAMPLE}.`);
  const queue = readQueueReference(program, assignedValue(queueProperty), queueProperty, `the queue of ${owner}`);
  if ('problem' in queue) return report(queueProperty, queue.problem);

  let partitionKey: FunctionModel | null = null;
  const keyProperty = properties.get('partitionKey');
  const subject = describePartitionKey(queue.name, holder);
  if (keyProperty !== undefined) {
    const fn = resolveFunction(program, keyProperty);
    if (fn === null) {
      return report(
        keyProperty,
        `${subject} must be a function — inline (${example}) or the name of a function declared in this file or exported by a relative module — ` +
          'so codegen can check that it is pure.',
      );
    }
    if (fn !== 'absent') partitionKey = functionModel(program, keyProperty, analyzer.analyze(fn, holder.context));
  }

  const parts: PinnedPart[] = [];
  if (partitionKey !== null && keyProperty !== undefined) {
    const keyPart = pinPart(program, keyProperty, 'partitionKey', holder.step, subject, malformed);
    if (keyPart === null) return null;
    parts.push(keyPart);
  }
  return { use: { queue, partitionKey, location: program.location(property.name ?? property) }, parts };
}
