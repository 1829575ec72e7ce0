import path from 'node:path';
import { stepsAndCompensations, type WorkflowModel } from '../model/workflow-model.js';
import { CONTRACTS_DIR } from './generated-file.js';

/** `charge_card` → `ChargeCard`, `orderPayment` → `OrderPayment`, `payment.settled` → `PaymentSettled`. */
export function pascalCase(name: string): string {
  return name
    .split(/[._-]+/)
    .filter((part) => part.length > 0)
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join('');
}

export function camelCase(name: string): string {
  const pascal = pascalCase(name);
  return pascal.length === 0 ? pascal : pascal[0]!.toLowerCase() + pascal.slice(1);
}

/** Names a workflow version's generated contract exports; all derive from the workflow const's name. */
export interface ContractNames {
  readonly file: string;
  readonly input: string;
  readonly handlers: string;
  readonly bind: string;
  readonly definitionHash: string;
  /** Output type per step, in step order, then per compensation, in the order they run: by position. */
  readonly outputs: readonly string[];
}

export function contractNames(workflow: WorkflowModel): ContractNames {
  const base = pascalCase(workflow.exportName);
  const camel = camelCase(workflow.exportName);
  const used = new Set<string>();
  const outputs = stepsAndCompensations(workflow).map((step) => {
    let name = `${base}${pascalCase(step.name)}Output`;
    if (used.has(name)) name = `${base}${pascalCase(step.name)}${step.position + 1}Output`;
    used.add(name);
    return name;
  });
  return {
    file: contractFileName(workflow),
    input: `${base}Input`,
    handlers: `${base}Handlers`,
    bind: `${camel}Handlers`,
    definitionHash: `${camel}DefinitionHash`,
    outputs,
  };
}

/** The generated sender of an event: `payment.settled` → `sendPaymentSettled`. */
export function eventSenderName(eventName: string): string {
  return `send${pascalCase(eventName)}`;
}

/** `contracts/order-payment.v1.ts`, relative to the output directory. */
export function contractFileName(workflow: Pick<WorkflowModel, 'name' | 'version'>): string {
  return `${CONTRACTS_DIR}/${workflow.name}.v${workflow.version}.ts`;
}

/**
 * Import specifier of a TypeScript source from a generated file, both relative to the root:
 * relative, with the `.js` extension NodeNext resolution wants.
 */
export function importSpecifier(fromFile: string, toFile: string): string {
  const relative = path.posix.relative(path.posix.dirname(`/${fromFile}`), `/${toFile}`);
  const withJs = relative
    .replace(/\.ts$/, '.js')
    .replace(/\.mts$/, '.mjs')
    .replace(/\.cts$/, '.cjs')
    .replace(/\.tsx$/, '.js');
  return withJs.startsWith('.') ? withJs : `./${withJs}`;
}

export function compareWorkflows(
  a: Pick<WorkflowModel, 'name' | 'version'>,
  b: Pick<WorkflowModel, 'name' | 'version'>,
): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : a.version - b.version;
}
