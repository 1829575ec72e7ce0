import { sql, type Kysely, type RawBuilder } from 'kysely';
import { isBuiltInKind } from '../../dsl/step-kind.js';
import type { StepDefinition } from '../../dsl/workflow.js';
import { shapeHash } from '../../dsl/workflow-shape.js';
import type { ReconcileContext, ReconcileOutcome } from '../contracts/handler-types.js';
import { StaleContractError, type WorkflowRegistration } from '../contracts/registration.js';
import { MigrationError, notMigratedError } from '../errors.js';
import type { LedgerflowDatabase } from '../store/tables.js';
import { describeUnfinished, strandedVersions } from '../client/workflow-versions.js';

/*
 * The registered workflow versions a worker (and its reconciler) serves, indexed by name and
 * version, with what the claim's `unnest` needs, and the checks before it starts: every step has
 * a handler of its kind's shape and the contract is current (`buildRegistry`, no database), each
 * version is migrated (`verifyMigrated`), and no other version of a workflow it serves has
 * unfinished runs nobody here drives (`verifyServed`: refused, or a warning under `allowMissing`).
 * Built once at start, immutable after.
 */

/** What the worker and reconciler need per registered workflow version. */
export interface RegisteredWorkflow {
  readonly registration: WorkflowRegistration;
  readonly name: string;
  readonly version: number;
  /**
   * Every step a run of this version can be at, by position: the workflow's steps, then its
   * compensations in the order they run (`Workflow.compensations`, positions after the steps).
   */
  readonly steps: readonly StepDefinition[];
  /** How many of {@link RegisteredWorkflow.steps} are the workflow's own steps; at or past it a run is compensating. */
  readonly stepCount: number;
  handler(stepName: string): unknown;
  /** `reconcile` of an external step, when its handler has one. */
  reconciler(
    stepName: string,
  ): ((ctx: ReconcileContext<unknown, unknown>) => Promise<ReconcileOutcome<unknown>>) | undefined;
}

export interface WorkflowRegistry {
  get(name: string, version: number): RegisteredWorkflow | undefined;
  readonly all: readonly RegisteredWorkflow[];
  /** Parallel arrays for `unnest($names, $versions)` in claim and reconcile queries. */
  readonly names: readonly string[];
  readonly versions: readonly number[];
}

const id = (name: string, version: number): string => `${name}@${version}`;

/**
 * Run `r` is of a version `served` lists, as SQL: how the claim's candidates, the reconciler's due
 * intents, a drain's count of what is left and the testing kit's reads all name the runs they serve.
 */
export function ofServedVersion(served: Pick<WorkflowRegistry, 'names' | 'versions'>): RawBuilder<boolean> {
  return sql<boolean>`(r.workflow_name, r.workflow_version) IN (SELECT * FROM unnest(${served.names}::text[], ${served.versions}::int[]))`;
}

/**
 * The step a run goes on to after `step`, in the same phase: the workflow's next step, or the
 * next compensation; `undefined` after the last of either (the run completes, or is compensated).
 */
export function nextStepOf(
  workflow: Pick<RegisteredWorkflow, 'steps' | 'stepCount'>,
  step: StepDefinition,
): StepDefinition | undefined {
  const end = step.compensates === undefined ? workflow.stepCount : workflow.steps.length;
  return step.position + 1 < end ? workflow.steps[step.position + 1] : undefined;
}

/**
 * Where a run that fails for good at `step` compensates from: the position of the workflow's first
 * compensation — `undefined` when it declares none, or when `step` is itself a compensation.
 */
export function compensationStart(
  workflow: Pick<RegisteredWorkflow, 'steps' | 'stepCount'>,
  step: StepDefinition,
): number | undefined {
  return step.compensates === undefined && workflow.steps.length > workflow.stepCount ? workflow.stepCount : undefined;
}

/**
 * Whether an open intent of `step` is settled by performing it again with the same key rather
 * than by a lookup: an `external` step whose provider dedupes by key (`idempotentByKey`) and that
 * has no `reconcile`. Nothing else can tell whether its effect happened.
 */
export function settledByKey(workflow: Pick<RegisteredWorkflow, 'reconciler'>, step: StepDefinition): boolean {
  return step.kind === 'external' && step.idempotentByKey === true && workflow.reconciler(step.name) === undefined;
}

/** The compensation that undoes `stepName`, if the workflow declares one. */
export function compensationOf(
  workflow: Pick<RegisteredWorkflow, 'steps'>,
  stepName: string,
): StepDefinition | undefined {
  return workflow.steps.find((s) => s.compensates === stepName);
}

/**
 * Indexes registrations and checks, without touching the database, that each is usable: the
 * contract is current and every step has a handler of the shape its kind demands.
 */
export function buildRegistry(registrations: readonly WorkflowRegistration[]): WorkflowRegistry {
  const byId = new Map<string, RegisteredWorkflow>();
  for (const registration of registrations) {
    const { workflow, handlers } = registration;
    const where = `workflow "${workflow.name}" v${workflow.version}`;
    if (byId.has(id(workflow.name, workflow.version))) {
      throw new TypeError(`${where} is registered twice; pass each workflow version once.`);
    }
    const actual = shapeHash(workflow);
    if (registration.definitionHash !== actual) {
      throw new StaleContractError(
        `The handlers for ${where} were bound for definition ${registration.definitionHash}, but the workflow is now ${actual}. ` +
          'Run `ledgerflow codegen` (and bump the version if this one already ran).',
      );
    }
    if (workflow.steps.length === 0)
      throw new TypeError(`${where} has no steps; declare at least one before registering it.`);
    const steps = [...workflow.steps, ...workflow.compensations];
    for (const step of steps) {
      if (!isBuiltInKind(step.kind)) checkHandler(where, step, handlers[step.name]);
    }
    byId.set(id(workflow.name, workflow.version), {
      registration,
      name: workflow.name,
      version: workflow.version,
      steps,
      stepCount: workflow.steps.length,
      handler: (stepName) => handlers[stepName],
      reconciler: (stepName) => {
        const handler = handlers[stepName] as { reconcile?: unknown } | undefined;
        return typeof handler?.reconcile === 'function'
          ? (handler.reconcile.bind(handler) as ReturnType<RegisteredWorkflow['reconciler']>)
          : undefined;
      },
    });
  }
  const all = [...byId.values()];
  return {
    get: (name, version) => byId.get(id(name, version)),
    all,
    names: all.map((w) => w.name),
    versions: all.map((w) => w.version),
  };
}

function checkHandler(where: string, step: StepDefinition, handler: unknown): void {
  const at =
    step.compensates === undefined
      ? `${where}, step "${step.name}" (${step.kind})`
      : `${where}, compensation "${step.name}" of step "${step.compensates}" (${step.kind})`;
  if (step.kind !== 'external') {
    if (typeof handler !== 'function') throw new TypeError(`The handler for ${at} must be a function.`);
    return;
  }
  const external = handler as { perform?: unknown; reconcile?: unknown } | undefined;
  if (typeof external?.perform !== 'function') {
    throw new TypeError(`The handler for ${at} must be an object with perform({ key, ... }).`);
  }
  if (!step.idempotentByKey && typeof external.reconcile !== 'function') {
    throw new TypeError(
      `The handler for ${at} needs reconcile({ key, intent }): the provider does not dedupe by key ` +
        '(declare idempotentByKey: true only if it does).',
    );
  }
}

/**
 * Compares each registration with the migrated `workflow_version` row, so that a worker never
 * runs code whose steps differ from what the database was migrated for.
 */
export async function verifyMigrated(db: Kysely<LedgerflowDatabase>, registry: WorkflowRegistry): Promise<void> {
  let rows: { workflow_name: string; version: number; definition_hash: string }[];
  try {
    rows = (
      await sql<{ workflow_name: string; version: number; definition_hash: string }>`
        SELECT workflow_name, version, definition_hash FROM ledgerflow.workflow_version`.execute(db)
    ).rows;
  } catch (error) {
    throw notMigratedError(error) ?? error;
  }
  const migrated = new Map(rows.map((r) => [id(r.workflow_name, r.version), r.definition_hash]));
  const problems: string[] = [];
  for (const workflow of registry.all) {
    const hash = migrated.get(id(workflow.name, workflow.version));
    const code = workflow.registration.definitionHash;
    if (hash === undefined) {
      problems.push(`workflow "${workflow.name}" v${workflow.version} is not migrated (run \`ledgerflow migrate\`)`);
    } else if (hash !== code) {
      problems.push(
        `workflow "${workflow.name}" v${workflow.version} was migrated as ${hash} but the code is ${code} ` +
          '(run `ledgerflow codegen` then `ledgerflow migrate`; if this version already ran, bump its version)',
      );
    }
  }
  if (problems.length > 0) throw new MigrationError(`Cannot start the worker: ${problems.join('; ')}.`);
}

/**
 * Refuses to start a worker that serves some versions of a workflow while another version of it
 * has unfinished runs nobody here can drive (they would wait forever, silently): names each such
 * version with its counts. `allowMissing` (rolling deploys, where another worker serves the old
 * version) turns the refusal into the returned list, for a warning.
 */
export async function verifyServed(
  db: Kysely<LedgerflowDatabase>,
  registry: WorkflowRegistry,
  allowMissing: boolean,
): Promise<readonly string[]> {
  const stranded = (await strandedVersions(db, registry.all)).map(describeUnfinished);
  if (stranded.length > 0 && !allowMissing) {
    throw new MigrationError(
      `Cannot start the worker: it has no handlers for ${stranded.join('; ')}. Register those versions' handlers ` +
        'too (keep each version declared until its runs finish; `ledgerflow versions` lists them), or, if another ' +
        'worker serves them (a rolling deploy), start with allowMissingVersions / --allow-missing-versions.',
    );
  }
  return stranded;
}
