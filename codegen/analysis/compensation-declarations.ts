import { ts } from 'ts-morph';
import { STEP_NAME } from '../../dsl/names.js';
import type { StepKind } from '../../dsl/step-kind.js';
import { describePart, type PinnedPart } from '../model/pinned-parts.js';
import type { CompensationModel, KeyModel, MalformedDeclaration, StepFunctionModel } from '../model/workflow-model.js';
import type { AnalysisProgram } from './analysis-program.js';
import { functionContext, functionModel } from './function-model.js';
import { keyValue } from './key-value.js';
import { analyzeKeyValues } from './key-values.js';
import { initializerText, pinPart, resolveFunction } from './property-values.js';
import type { PurityAnalyzer } from './purity-analyzer.js';
import type { ValueContext } from './shape-reader.js';
import { propertyName, skipWrappers } from './syntax.js';

/** The step a `compensate` belongs to, as far as reading the compensation needs it. */
export interface CompensatedStep {
  readonly name: string;
  readonly kind: StepKind;
  /** The names of the steps its compensation's functions see: the earlier steps and the step itself. */
  readonly visible: readonly string[];
}

/** The parts a compensation pins (under its own name, `steps.<compensation>.<kind>`), in this order. */
const COMPENSATION_PARTS = ['output', 'key', 'request'] as const;

/**
 * Reads a step's `compensate: { name, key, output, request?, retry?, idempotentByKey?, ... }`: its
 * name, its key (analysed for purity like a step's, over the outputs of the steps up to and
 * including the one it undoes), and the parts runs in flight depend on. Its position is set once
 * the whole chain is read (the workflow's compensations run in reverse order, after the steps).
 * What codegen cannot read is reported as malformed (LF008); the result is then null.
 */
export function readCompensation(
  program: AnalysisProgram,
  analyzer: PurityAnalyzer,
  step: CompensatedStep,
  property: ts.ObjectLiteralElementLike,
  malformed: MalformedDeclaration[],
  values?: ValueContext,
): { model: CompensationModel; parts: PinnedPart[] } | null {
  const report = (node: ts.Node, message: string): null => {
    malformed.push({ location: program.location(node), message });
    return null;
  };
  if (step.kind !== 'transactional' && step.kind !== 'external') {
    return report(
      property,
      `${step.kind} step "${step.name}" declares compensate; only transactional and external steps have an effect to undo — remove it.`,
    );
  }
  const config = ts.isPropertyAssignment(property) ? skipWrappers(property.initializer) : undefined;
  if (config === undefined || !ts.isObjectLiteralExpression(config)) {
    return report(
      property,
      `the compensate of step "${step.name}" must be an object literal ({ name, key, output, ... }) so codegen can read its name and check its key.`,
    );
  }
  const properties = new Map<string, ts.ObjectLiteralElementLike>();
  for (const p of config.properties) {
    if (ts.isSpreadAssignment(p)) {
      return report(
        p,
        `the compensate of step "${step.name}" uses a spread; write name, key and the other properties out so codegen can see them.`,
      );
    }
    const key = propertyName(p);
    if (key !== null) properties.set(key, p);
  }
  const nameProperty = properties.get('name');
  const nameNode =
    nameProperty !== undefined && ts.isPropertyAssignment(nameProperty)
      ? skipWrappers(nameProperty.initializer)
      : undefined;
  if (nameNode === undefined || !(ts.isStringLiteral(nameNode) || ts.isNoSubstitutionTemplateLiteral(nameNode))) {
    return report(
      nameProperty ?? property,
      `the compensation of step "${step.name}" needs a string literal name (e.g. name: 'undo${step.name[0]!.toUpperCase()}${step.name.slice(1)}'): it names its handler in the generated contract.`,
    );
  }
  const name = nameNode.text;
  if (!STEP_NAME.test(name)) {
    return report(
      nameNode,
      `compensation name "${name}" is invalid: use letters, digits and _ (max 63 characters), starting with a letter or _.`,
    );
  }

  let idempotentByKey = false;
  const idempotent = properties.get('idempotentByKey');
  if (idempotent !== undefined) {
    const value = ts.isPropertyAssignment(idempotent) ? skipWrappers(idempotent.initializer) : undefined;
    if (
      value === undefined ||
      (value.kind !== ts.SyntaxKind.TrueKeyword && value.kind !== ts.SyntaxKind.FalseKeyword)
    ) {
      return report(
        idempotent,
        `idempotentByKey of compensation "${name}" must be the literal true or false; it decides whether its handler must supply reconcile.`,
      );
    }
    idempotentByKey = step.kind === 'external' && value.kind === ts.SyntaxKind.TrueKeyword;
  }

  let key: KeyModel | null = null;
  const keyProperty = properties.get('key');
  if (keyProperty !== undefined) {
    const fn = resolveFunction(program, keyProperty);
    if (fn === null) {
      return report(
        keyProperty,
        `the key of compensation "${name}" must be a function — inline (({ input, steps }) => \`...\`) or the name of a function declared in this file or exported by a relative module — so codegen can check that it is pure.`,
      );
    }
    if (fn !== 'absent') {
      const model: KeyModel = {
        ...functionModel(program, keyProperty, analyzer.analyze(fn, functionContext(step.visible))),
        value: keyValue(program, fn),
      };
      key = values === undefined ? model : { ...model, values: analyzeKeyValues(program, fn, values) };
    }
  }

  // Its request, whose hash its ledger row keeps like a step's: checked like its key.
  const functions: StepFunctionModel[] = [];
  const requestProperty = properties.get('request');
  if (requestProperty !== undefined) {
    const fn = resolveFunction(program, requestProperty);
    if (fn === null) {
      return report(
        requestProperty,
        `the request of compensation "${name}" must be a function — inline (({ input, steps }) => ({ ... })) or the name of a function declared in this file or exported by a relative module — so codegen can check that it is pure.`,
      );
    }
    if (fn !== 'absent')
      functions.push({
        part: 'request',
        ...functionModel(program, requestProperty, analyzer.analyze(fn, functionContext(step.visible))),
      });
  }

  const parts: PinnedPart[] = [];
  for (const part of COMPENSATION_PARTS) {
    const declared = properties.get(part);
    if (declared === undefined || (part === 'key' && key === null)) continue;
    const pinned = pinPart(
      program,
      declared,
      part,
      name,
      describePart({ kind: part, step: name }, step.name),
      malformed,
    );
    if (pinned === null) return null;
    parts.push(pinned);
  }

  const model: CompensationModel = {
    name,
    kind: step.kind,
    position: -1,
    idempotentByKey,
    location: program.location(nameNode),
    key,
    functions,
    conditional: false,
    hasRequest: properties.has('request'),
    hasRetry: properties.has('retry'),
    performTimeoutText: initializerText(properties.get('performTimeoutMs')),
    compensates: step.name,
  };
  return { model, parts };
}
