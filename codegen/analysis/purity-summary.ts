// What the purity analysis accumulates for one function while it walks it (a Summary), how it
// records reads and findings into it, how a helper's or constant's summary is merged into its
// caller's, and how the analysed function's summary becomes the plain-data PurityReport.

import { ts } from 'ts-morph';
import type {
  ContextDescription,
  DataRead,
  MutableReadReason,
  NondeterministicSource,
  PurityFinding,
  PurityReport,
  StepRead,
  ViaHop,
} from '../model/purity.js';
import type { SourceLocation } from '../model/source-location.js';
import type { AnalysisProgram } from './analysis-program.js';
import type { BoundScope, Root } from './purity-roots.js';
import { declarationNameNode, outermostWrapper, shortText, skipWrappers } from './syntax.js';

/** A step read, with where the read itself is and its text (for an invisible-step-read finding). */
interface StepReadRecord extends StepRead {
  readonly origin: SourceLocation;
  readonly text: string;
}

/** Everything one function (the analysed one, or a helper or constant it uses) reads and does. */
export interface Summary {
  readsWholeContext: boolean;
  /** Data properties read as a whole. */
  readonly wholeData: Set<string>;
  /** Paths read below each data property. */
  readonly dataPaths: Map<string, Set<string>>;
  readsAllSteps: boolean;
  readonly stepReads: StepReadRecord[];
  readonly calls: Set<string>;
  readonly findings: PurityFinding[];
}

export function emptySummary(): Summary {
  return {
    readsWholeContext: false,
    wholeData: new Set(),
    dataPaths: new Map(),
    readsAllSteps: false,
    stepReads: [],
    calls: new Set(),
    findings: [],
  };
}

/** A scope being analysed, what it has found so far, and the arguments it handed to followed helpers. */
export interface Frame extends BoundScope {
  readonly summary: Summary;
  /** Arguments handed to a followed helper: the helper records what it reads of them. */
  readonly boundArguments: Set<ts.Node>;
}

/** Records reads and findings into a frame's summary, located in the analysed sources. */
export class SummaryRecorder {
  readonly #program: AnalysisProgram;

  constructor(program: AnalysisProgram) {
    this.#program = program;
  }

  nondeterministic(frame: Frame, node: ts.Node, source: NondeterministicSource, text: string): void {
    this.#finding(frame, { kind: 'nondeterministic', source }, node, text);
  }

  impureCall(frame: Frame, node: ts.Node, callee: string, module?: string): void {
    const shown = module === undefined ? callee : `${callee} (imported from '${module}')`;
    this.#finding(frame, { kind: 'impure-call', callee: shown }, node, callee);
  }

  mutableRead(
    frame: Frame,
    node: ts.Node,
    reason: MutableReadReason,
    binding: string,
    module: string | null,
    declaration?: ts.Node,
  ): void {
    const origin = declaration === undefined ? node : declarationNameNode(declaration);
    const location = this.#program.location(node);
    frame.summary.findings.push({
      kind: 'mutable-read',
      reason,
      binding,
      module,
      at: location,
      origin: this.#program.location(origin),
      text: shortText(node),
      via: [],
    });
  }

  /** Records a read of the context at the outermost expression that still names it. */
  read(frame: Frame, node: ts.Expression, root: Root): void {
    const { outer, parent } = outermostWrapper(node);
    const isReceiverOfMethodCall =
      (ts.isPropertyAccessExpression(parent) || ts.isElementAccessExpression(parent)) &&
      parent.expression === outer &&
      ts.isCallExpression(parent.parent) &&
      parent.parent.expression === parent;
    const isObjectOfMemberRead =
      (ts.isPropertyAccessExpression(parent) || ts.isElementAccessExpression(parent)) && parent.expression === outer;
    if (isObjectOfMemberRead && !isReceiverOfMethodCall) return;
    // `const { load } = steps` or `const id = input.id`: the variable's uses record the read.
    if (ts.isVariableDeclaration(parent) && parent.initializer === outer) return;
    if (frame.boundArguments.has(skipWrappers(node)) || frame.boundArguments.has(outer)) return;
    const summary = frame.summary;
    switch (root.kind) {
      case 'ctx':
      case 'rest':
        summary.readsWholeContext = true;
        return;
      case 'data':
        if (root.path === '') summary.wholeData.add(root.property);
        else pathsOf(summary, root.property).add(root.path);
        return;
      case 'steps':
        summary.readsAllSteps = true;
        return;
      case 'step': {
        const location = this.#program.location(node);
        summary.stepReads.push({
          step: root.step,
          path: root.path,
          at: location,
          via: [],
          origin: location,
          text: shortText(node),
        });
        return;
      }
      case 'steps-dynamic':
        this.#finding(frame, { kind: 'dynamic-step-access' }, node, shortText(node));
        return;
    }
  }

  /** Adds what a helper or constant does to the caller, located at the call/read site. */
  merge(frame: Frame, site: ts.Node, hop: ViaHop, inner: Summary): void {
    const at = this.#program.location(site);
    const summary = frame.summary;
    summary.readsWholeContext ||= inner.readsWholeContext;
    for (const property of inner.wholeData) summary.wholeData.add(property);
    for (const [property, paths] of inner.dataPaths) {
      const into = pathsOf(summary, property);
      for (const path of paths) into.add(path);
    }
    summary.readsAllSteps ||= inner.readsAllSteps;
    for (const read of inner.stepReads) summary.stepReads.push({ ...read, at, via: [hop, ...read.via] });
    for (const call of inner.calls) summary.calls.add(call);
    for (const finding of inner.findings) summary.findings.push({ ...finding, at, via: [hop, ...finding.via] });
  }

  #finding(
    frame: Frame,
    detail:
      | { kind: 'nondeterministic'; source: NondeterministicSource }
      | { kind: 'impure-call'; callee: string }
      | { kind: 'dynamic-step-access' },
    node: ts.Node,
    text: string,
  ): void {
    const location = this.#program.location(node);
    frame.summary.findings.push({ ...detail, at: location, origin: location, text, via: [] });
  }
}

function pathsOf(summary: Summary, property: string): Set<string> {
  let paths = summary.dataPaths.get(property);
  if (paths === undefined) summary.dataPaths.set(property, (paths = new Set()));
  return paths;
}

/** The analysed function's summary as the report its caller gets, judged against `context`. */
export function toReport(summary: Summary, context: ContextDescription): PurityReport {
  const data: Record<string, DataRead> = {};
  for (const property of context.data) {
    data[property] = {
      whole: summary.readsWholeContext || summary.wholeData.has(property),
      paths: [...(summary.dataPaths.get(property) ?? [])].sort(),
    };
  }
  const readsAllSteps = context.steps !== null && (summary.readsWholeContext || summary.readsAllSteps);
  const stepReads: StepRead[] = summary.stepReads.map(({ step, path, at, via }) => ({ step, path, at, via }));
  const visible = new Set(context.steps?.visible ?? []);
  const invisibleReads: PurityFinding[] = summary.stepReads
    .filter((read) => !visible.has(read.step))
    .map(({ step, path, at, origin, text, via }) => ({
      kind: 'invisible-step-read',
      step,
      path,
      at,
      origin,
      text,
      via,
    }));
  const dependsOnContext =
    Object.values(data).some((read) => read.whole || read.paths.length > 0) || readsAllSteps || stepReads.length > 0;
  return {
    dependsOnContext,
    data,
    readsAllSteps,
    stepReads,
    calls: [...summary.calls].sort(),
    findings: [...withoutRepeats(summary.findings), ...invisibleReads],
  };
}

/** Drops a finding met again the same way (same kind, place and text), e.g. through two paths. */
function withoutRepeats(findings: readonly PurityFinding[]): PurityFinding[] {
  const seen = new Set<string>();
  return findings.filter((finding) => {
    const id = JSON.stringify([finding.kind, finding.at, finding.origin, finding.text]);
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}
