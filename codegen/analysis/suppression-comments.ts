import { ts } from 'ts-morph';
import type { SuppressionComment } from '../model/suppression.js';
import type { AnalysisProgram } from './analysis-program.js';

/** `// ledgerflow-ignore` and what follows it on the line. */
const DIRECTIVE = /^\/\/\s*ledgerflow-ignore(?![\w-])(.*)$/;

/**
 * Every `// ledgerflow-ignore` comment in the program's files under the root (the workflow files
 * and the modules they import). Only line comments count: a suppression is one line above the
 * line it applies to.
 */
export function readSuppressionComments(program: AnalysisProgram): SuppressionComment[] {
  const comments: SuppressionComment[] = [];
  for (const sourceFile of program.sourceFiles()) {
    const file = program.relativePath(sourceFile.fileName);
    if (file.startsWith('..') || file.split('/').includes('node_modules')) continue;
    comments.push(...commentsOf(sourceFile, file));
  }
  return comments;
}

function commentsOf(sourceFile: ts.SourceFile, file: string): SuppressionComment[] {
  const text = sourceFile.text;
  if (!text.includes('ledgerflow-ignore')) return [];
  const found: { line: number; col: number; alone: boolean; body: string }[] = [];
  for (const range of lineComments(sourceFile)) {
    const match = DIRECTIVE.exec(text.slice(range.pos, range.end));
    if (match === null) continue;
    const { line, character } = sourceFile.getLineAndCharacterOfPosition(range.pos);
    const lineStart = sourceFile.getPositionOfLineAndCharacter(line, 0);
    found.push({
      line: line + 1,
      col: character + 1,
      alone: text.slice(lineStart, range.pos).trim() === '',
      body: match[1]!,
    });
  }
  const aloneLines = new Set(found.filter((c) => c.alone).map((c) => c.line));
  return found.map(({ line, col, body }) => {
    let target = line + 1;
    while (aloneLines.has(target)) target++;
    return { location: { file, line, col }, target, ...parseBody(body) };
  });
}

/**
 * The file's `//` comments, in order: the comment ranges around every node of the tree (what
 * the compiler attaches comments to), so that text inside a string or a template never counts.
 */
function lineComments(sourceFile: ts.SourceFile): ts.CommentRange[] {
  const text = sourceFile.text;
  const ranges = new Map<number, ts.CommentRange>();
  const add = (list: ts.CommentRange[] | undefined): void => {
    for (const range of list ?? [])
      if (range.kind === ts.SyntaxKind.SingleLineCommentTrivia) ranges.set(range.pos, range);
  };
  const visit = (node: ts.Node): void => {
    add(ts.getLeadingCommentRanges(text, node.pos));
    add(ts.getTrailingCommentRanges(text, node.end));
    // Also the lines after a node: a comment before the next `.step(...)` of a chain precedes the
    // dot, a token no node starts at, so only the end of the call before it reaches it.
    add(ts.getLeadingCommentRanges(text, node.end));
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);
  add(ts.getLeadingCommentRanges(text, sourceFile.endOfFileToken.pos));
  return [...ranges.values()].sort((a, b) => a.pos - b.pos);
}

/** ` LF005: why` → code and reason; a code alone, or a colon with nothing after it, has no reason. */
function parseBody(body: string): { code: string | null; reason: string | null } {
  const match = /^\s*([^\s:]+)?\s*(?::(.*))?$/.exec(body);
  const code = match?.[1] ?? null;
  const reason = match?.[2]?.trim() ?? '';
  return { code, reason: reason === '' ? null : reason };
}
