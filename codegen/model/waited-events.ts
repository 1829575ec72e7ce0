import { compareLocations } from './source-location.js';
import type { EventReference, StepModel, WorkflowModel } from './workflow-model.js';

/** An event some workflow waits for, with every step that waits for it. */
export interface WaitedEvent {
  readonly event: EventReference;
  readonly waiters: readonly EventWaiter[];
}

export interface EventWaiter {
  readonly workflow: WorkflowModel;
  readonly step: StepModel;
}

/**
 * The events the workflows wait for, one per declaration (module and export name), in the order
 * of their declarations; waiters by workflow name, version and step order. Whatever the order of
 * `workflows`, the result is the same.
 */
export function waitedEvents(workflows: readonly WorkflowModel[]): WaitedEvent[] {
  const byDeclaration = new Map<string, { event: EventReference; waiters: EventWaiter[] }>();
  const sorted = [...workflows].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.version - b.version));
  for (const workflow of sorted) {
    for (const step of workflow.steps) {
      const event = step.wait?.event;
      if (event === undefined) continue;
      const id = `${event.file}#${event.exportName}`;
      let entry = byDeclaration.get(id);
      if (entry === undefined) byDeclaration.set(id, (entry = { event, waiters: [] }));
      entry.waiters.push({ workflow, step });
    }
  }
  return [...byDeclaration.values()].sort((a, b) => compareLocations(a.event.location, b.event.location));
}
