// LF017's half of the value analysis: the reads of a conditional step's output (`undefined` for
// every run that skipped it) that a key makes without handling its absence.

import { ts } from 'ts-morph';
import type { ConditionalStepRead } from '../model/key-values.js';
import type { AnalysisProgram } from './analysis-program.js';
import { rootOf, type BoundScope } from './purity-roots.js';
import type { ValueContext } from './shape-reader.js';
import { outermostWrapper, shortText, type FunctionLike } from './syntax.js';

/** The read of a conditional step's whole output at `node`, when it is not guarded; null otherwise. */
export function conditionalRead(
  program: AnalysisProgram,
  node: ts.Expression,
  scope: BoundScope,
  context: ValueContext,
  fn: FunctionLike,
): ConditionalStepRead | null {
  const root = rootOf(program, node, scope);
  if (root === null || root.kind !== 'step' || root.path !== '') return null;
  const step = context.steps.get(root.step);
  if (step === undefined || step.when === null || root.step === context.ownStep) return null;
  if (context.ownWhen !== null && normalize(context.ownWhen) === normalize(step.when)) return null;
  const { outer, parent } = outermostWrapper(node);
  // `const out = steps.x`: the uses of `out` are the reads.
  if (ts.isVariableDeclaration(parent) && parent.initializer === outer) return null;
  // `steps.x` inside `steps.x.id`: the read is of `steps.x`, checked here once.
  if (isGuarded(outer, root.step, fn)) return null;
  return { at: program.location(node), step: root.step, text: shortText(chainTop(outer)) };
}

function normalize(text: string): string {
  return text.replace(/\s+/g, '');
}

/** Whether an `if` in `block` (not in a nested function) tests something that mentions the step. */
function testsStep(block: ts.Block, mentions: (node: ts.Node) => boolean): boolean {
  let found = false;
  const visit = (node: ts.Node): void => {
    if (found || ts.isFunctionLike(node)) return;
    if (ts.isIfStatement(node) && mentions(node.expression)) found = true;
    else ts.forEachChild(node, visit);
  };
  ts.forEachChild(block, visit);
  return found;
}

/** The outermost member access, call or optional chain that `node` starts (`steps.x` → `steps.x?.id`). */
function chainTop(node: ts.Node): ts.Node {
  let current = node;
  for (;;) {
    const parent = current.parent;
    if (
      ((ts.isPropertyAccessExpression(parent) || ts.isElementAccessExpression(parent)) &&
        parent.expression === current) ||
      (ts.isCallExpression(parent) && parent.expression === current) ||
      ts.isNonNullExpression(parent) ||
      ts.isParenthesizedExpression(parent)
    ) {
      current = parent;
    } else {
      return current;
    }
  }
}

/**
 * A read of a conditional step's output is guarded when what it is part of says what to do without
 * it: the left side of `??` or `||`, a test (`steps.x === undefined`, `!steps.x`, `typeof`, the
 * condition of `?:`, `&&` or `if`), or a branch of a test that mentions the step.
 */
function isGuarded(read: ts.Node, step: string, fn: FunctionLike): boolean {
  const mentions = (node: ts.Node): boolean => new RegExp(`\\b${step}\\b`).test(node.getText());
  // `if (!steps.x) return 'none';` before the read: an `if` that tests the step guards the whole body.
  if (fn.body !== undefined && ts.isBlock(fn.body) && testsStep(fn.body, mentions)) return true;
  let child: ts.Node = chainTop(read);
  for (let node = child.parent; node !== undefined && node !== fn; child = node, node = node.parent) {
    if (ts.isBinaryExpression(node)) {
      const operator = node.operatorToken.kind;
      if (
        (operator === ts.SyntaxKind.QuestionQuestionToken || operator === ts.SyntaxKind.BarBarToken) &&
        node.left === child
      )
        return true;
      if (operator === ts.SyntaxKind.AmpersandAmpersandToken) return node.left === child || mentions(node.left);
      if (
        operator === ts.SyntaxKind.EqualsEqualsEqualsToken ||
        operator === ts.SyntaxKind.ExclamationEqualsEqualsToken ||
        operator === ts.SyntaxKind.EqualsEqualsToken ||
        operator === ts.SyntaxKind.ExclamationEqualsToken
      ) {
        return true;
      }
    } else if (ts.isPrefixUnaryExpression(node) && node.operator === ts.SyntaxKind.ExclamationToken) {
      return true;
    } else if (ts.isTypeOfExpression(node)) {
      return true;
    } else if (ts.isConditionalExpression(node)) {
      return node.condition === child || mentions(node.condition);
    } else if (ts.isIfStatement(node)) {
      return node.expression === child || mentions(node.expression);
    }
  }
  return false;
}
