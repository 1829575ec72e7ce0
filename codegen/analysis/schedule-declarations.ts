// Reading `schedule('name', { cron, workflow, input, ... })` declarations: the `input` function a
// worker evaluates on each tick, checked for purity like a key over `({ scheduledAt })`. The cron,
// time zone and policy are the DSL's to check (it throws a TypeError when the module loads), and
// nothing here is pinned: a worker registers a schedule's current definition itself.

import { ts } from 'ts-morph';
import type { MalformedDeclaration, ScheduleModel } from '../model/workflow-model.js';
import type { AnalysisProgram } from './analysis-program.js';
import { dslImports, isDslCall } from './dsl-declarations.js';
import { functionModel, scheduleContext } from './function-model.js';
import { resolveFunction } from './property-values.js';
import type { PurityAnalyzer } from './purity-analyzer.js';
import { propertyName, skipWrappers } from './syntax.js';

const INPUT_EXAMPLE = 'input: ({ scheduledAt }) => ({ night: scheduledAt.slice(0, 10) })';

/**
 * The schedules one file declares with the `schedule` it imports from ledgerflow/dsl. What codegen
 * cannot read without running the code (a computed name, a spread config, an `input` that is not
 * a function it can find) is reported as malformed (LF008), never guessed at.
 */
export function analyzeScheduleFile(
  program: AnalysisProgram,
  analyzer: PurityAnalyzer,
  sourceFile: ts.SourceFile,
): { schedules: ScheduleModel[]; malformed: MalformedDeclaration[] } {
  const result = { schedules: [] as ScheduleModel[], malformed: [] as MalformedDeclaration[] };
  const imports = dslImports(sourceFile, 'schedule');
  if (imports.functions.size === 0 && imports.namespaces.size === 0) return result;
  const visit = (node: ts.Node): void => {
    if (ts.isCallExpression(node) && isDslCall(program, node, imports, 'schedule')) {
      const schedule = readSchedule(program, analyzer, node, result.malformed);
      if (schedule !== null) result.schedules.push(schedule);
    }
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  return result;
}

function readSchedule(
  program: AnalysisProgram,
  analyzer: PurityAnalyzer,
  call: ts.CallExpression,
  malformed: MalformedDeclaration[],
): ScheduleModel | null {
  const report = (node: ts.Node, message: string): null => {
    malformed.push({ location: program.location(node), message });
    return null;
  };
  const [nameArgument, configArgument] = call.arguments;
  const nameNode = nameArgument === undefined ? undefined : skipWrappers(nameArgument);
  if (nameNode === undefined || !(ts.isStringLiteral(nameNode) || ts.isNoSubstitutionTemplateLiteral(nameNode))) {
    return report(
      nameArgument ?? call,
      "the name of a schedule must be a string literal (schedule('nightly-report', { ... })), so that codegen can name it when it checks its input.",
    );
  }
  const name = nameNode.text;
  const config = configArgument === undefined ? undefined : skipWrappers(configArgument);
  if (config === undefined || !ts.isObjectLiteralExpression(config)) {
    return report(
      configArgument ?? call,
      `the config of schedule "${name}" must be an object literal, so that codegen can check its input; write it out in the call.`,
    );
  }
  let inputProperty: ts.ObjectLiteralElementLike | undefined;
  for (const element of config.properties) {
    if (ts.isSpreadAssignment(element)) {
      return report(
        element,
        `the config of schedule "${name}" uses a spread; write input out so that codegen can check it.`,
      );
    }
    if (propertyName(element) === 'input') inputProperty = element;
  }
  const location = program.location(call);
  // Without an input the call does not type-check; the compiler says so.
  if (inputProperty === undefined) return { name, location, input: null };
  const fn = resolveFunction(program, inputProperty);
  if (fn === null || fn === 'absent') {
    return report(
      inputProperty,
      `the input of schedule "${name}" must be a function — inline (${INPUT_EXAMPLE}) or the name of a function declared in this file ` +
        'or exported by a relative module — so that codegen can check that it is pure.',
    );
  }
  return { name, location, input: functionModel(program, inputProperty, analyzer.analyze(fn, scheduleContext())) };
}
