import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { AnyWorkflow } from '../../dsl/workflow.js';
import type { WorkflowRegistration } from '../contracts/registration.js';
import { UsageError } from './command.js';
import { importUserModule } from './import-user-module.js';
import { UserModuleError } from './user-module-error.js';

/** Where `start`, `send-event` and `signal` look for workflow definitions when `--workflows` is not given. */
export const DEFAULT_WORKFLOWS_MODULE = 'generated/index.ts';

export type WorkflowEntry = AnyWorkflow | WorkflowRegistration;

/** The user's module failed while loading: their code, so their stack trace is shown. */
export class WorkflowModuleError extends Error {
  override readonly name = 'WorkflowModuleError';
}

/**
 * Imports a module that exports `workflows`: an array of workflows or registrations
 * (`bindHandlers(...)` results), or a function returning one (possibly async), e.g.
 *
 * ```ts
 * export const workflows = [orderPaymentRegistration({ payments, email })];
 * ```
 */
export async function loadWorkflowsModule(path: string): Promise<WorkflowEntry[]> {
  const file = resolve(path);
  if (!existsSync(file)) {
    throw new UsageError(`--workflows ${path}: no such file.`);
  }
  let module: Record<string, unknown>;
  try {
    module = await importUserModule(file, `--workflows ${path}`);
  } catch (error) {
    if (error instanceof UsageError || error instanceof UserModuleError) throw error;
    throw new WorkflowModuleError(`Cannot load --workflows module ${path}: ${messageOf(error)}`, { cause: error });
  }
  let exported = module['workflows'];
  if (exported === undefined) {
    throw new UsageError(
      `--workflows ${path} has no export named "workflows". Export the workflow registrations, ` +
        'e.g. `export const workflows = [orderPaymentRegistration(services)];`.',
    );
  }
  if (typeof exported === 'function') {
    try {
      exported = await (exported as () => unknown)();
    } catch (error) {
      throw new WorkflowModuleError(`The workflows() function of ${path} failed: ${messageOf(error)}`, {
        cause: error,
      });
    }
  }
  if (!Array.isArray(exported)) {
    throw new UsageError(`The "workflows" export of ${path} must be an array (or a function returning one).`);
  }
  return exported.map((entry: unknown, i) => {
    if (isRegistration(entry) || isWorkflow(entry)) return entry;
    throw new UsageError(
      `workflows[${i}] in ${path} is neither a workflow nor a registration made by its generated handlers function.`,
    );
  });
}

/**
 * The workflows of a command whose `--workflows` is optional (`start`, `send-event`, `signal`):
 * that module, else {@link DEFAULT_WORKFLOWS_MODULE}, which codegen writes.
 */
export async function loadWorkflowsOption(option: string | undefined): Promise<WorkflowEntry[]> {
  if (option === undefined && !existsSync(DEFAULT_WORKFLOWS_MODULE)) {
    throw new UsageError(
      `No --workflows module given and ${DEFAULT_WORKFLOWS_MODULE} does not exist. Run \`ledgerflow codegen\` or pass --workflows <module>.`,
    );
  }
  return loadWorkflowsModule(option ?? DEFAULT_WORKFLOWS_MODULE);
}

/** Workers and the reconciler need handlers, not only definitions. */
export function requireRegistrations(entries: readonly WorkflowEntry[], path: string): WorkflowRegistration[] {
  const bare = entries.filter((e): e is AnyWorkflow => !isRegistration(e)).map((w) => `${w.name} v${w.version}`);
  if (bare.length > 0) {
    throw new UsageError(
      `${path} exports workflow definitions without handlers (${bare.join(', ')}). A worker needs registrations: ` +
        'export e.g. `workflows = [orderPaymentRegistration(services)]` made with the generated handlers function.',
    );
  }
  if (entries.length === 0) throw new UsageError(`The "workflows" export of ${path} is empty.`);
  return entries as WorkflowRegistration[];
}

function isRegistration(value: unknown): value is WorkflowRegistration {
  return (
    typeof value === 'object' &&
    value !== null &&
    'workflow' in value &&
    'handlers' in value &&
    'definitionHash' in value
  );
}

function isWorkflow(value: unknown): value is AnyWorkflow {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { name?: unknown }).name === 'string' &&
    typeof (value as { version?: unknown }).version === 'number' &&
    Array.isArray((value as { steps?: unknown }).steps)
  );
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
