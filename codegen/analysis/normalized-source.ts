// A node's source as a token stream that ignores what a formatter or a comment changes, and, read
// in the same walk, the identifiers in it that may refer to a declaration of its file's top level:
// the text pinned-source.ts hashes and the references it follows, so that what counts as the
// same source and what is followed are decided together.

import { ts } from 'ts-morph';
import { isReference, isTypeOnly } from './syntax.js';

/**
 * The source of `node` as a token stream that ignores what a formatter or a comment changes:
 * comments and whitespace (tokens are joined by one space), quote style and escapes of string
 * literals, the spelling of numbers (`1_000`, `1e3` and `1000.0` are `1000`), quotes on property
 * names that need none, trailing commas, the parentheses around a lone arrow parameter, and
 * optional semicolons. Everything else counts, and what ASI would decide is kept: every
 * statement, class member and type member ends with `;` in the stream whether or not the source
 * wrote one, and an array hole is a token of its own.
 *
 * @example
 * normalizedSource(parse("z.object({ 'id': z.string(), }) // the id")); // 'z . object ( { id : z . string ( ) } )'
 */
export function normalizedSource(node: ts.Node, sourceFile: ts.SourceFile = node.getSourceFile()): string {
  return readSource(node, sourceFile, null).text;
}

/** A node's normalized text, and the identifiers in it that may refer to a declaration of its file's top level. */
export interface SourceRead {
  readonly text: string;
  /** Identifiers read as values (not in types or imports) whose name the top level declares. */
  readonly references: readonly ts.Identifier[];
  /** Of those names, the ones the node declares itself (a parameter, a local): they may shadow. */
  readonly declared: ReadonlySet<string>;
}

/** One walk for both: the tokens, and (given `names`, the file's top-level names) the references. */
export function readSource(
  node: ts.Node,
  sourceFile: ts.SourceFile,
  names: ReadonlyMap<string, unknown> | null,
): SourceRead {
  const writer = new TokenWriter(sourceFile, names);
  writer.node(node);
  return { text: writer.tokens.join(' '), references: writer.references, declared: writer.declared };
}

const scanner = ts.createScanner(ts.ScriptTarget.Latest, /* skipTrivia */ true);

/**
 * Writes a node's tokens: child nodes by a walk of the tree, the punctuation and keywords
 * between them by scanning the gaps (what `getChildren()` does, without building token nodes).
 */
class TokenWriter {
  readonly tokens: string[] = [];
  readonly references: ts.Identifier[] = [];
  readonly declared = new Set<string>();
  readonly #sourceFile: ts.SourceFile;
  readonly #names: ReadonlyMap<string, unknown> | null;
  /** Inside a type or an import declaration: names there are not values read. */
  #notRead = 0;

  constructor(sourceFile: ts.SourceFile, names: ReadonlyMap<string, unknown> | null) {
    this.#sourceFile = sourceFile;
    this.#names = names;
  }

  node(node: ts.Node): void {
    if (node.kind === ts.SyntaxKind.EndOfFileToken) return;
    if (node.kind === ts.SyntaxKind.OmittedExpression) {
      this.tokens.push('<hole>');
      return;
    }
    if (node.kind <= ts.SyntaxKind.LastToken) {
      this.tokens.push(tokenText(node, this.#sourceFile));
      if (this.#names !== null && this.#notRead === 0 && ts.isIdentifier(node) && this.#names.has(node.text)) {
        if (isReference(node)) this.references.push(node);
        else this.declared.add(node.text);
      }
      return;
    }
    const notRead = isTypeOnly(node) || ts.isImportDeclaration(node);
    if (notRead) this.#notRead++;
    this.#children(node);
    if (notRead) this.#notRead--;
  }

  #children(node: ts.Node): void {
    const endsStatement = ts.isStatement(node) || ts.isClassElement(node) || ts.isTypeElement(node);
    let pos = node.pos;
    ts.forEachChild(
      node,
      (child) => {
        this.#gap(pos, child.pos, false);
        this.node(child);
        pos = child.end;
      },
      (list) => {
        const before = this.#gap(pos, list.pos, false);
        // `x => x` is `(x) => x`.
        const bare = ts.isArrowFunction(node) && list === node.parameters && before !== ts.SyntaxKind.OpenParenToken;
        if (bare) this.tokens.push('(');
        pos = list.pos;
        for (const element of list) {
          this.#gap(pos, element.pos, false);
          this.node(element);
          pos = element.end;
        }
        this.#gap(pos, list.end, (kind) => kind === ts.SyntaxKind.CommaToken);
        if (bare) this.tokens.push(')');
        pos = list.end;
      },
    );
    this.#gap(
      pos,
      node.end,
      endsStatement &&
        ((kind) =>
          kind === ts.SyntaxKind.SemicolonToken || (ts.isTypeElement(node) && kind === ts.SyntaxKind.CommaToken)),
    );
    if (endsStatement) this.tokens.push(';');
  }

  /** Writes the tokens in [pos, end) but a last one that `dropLast` matches; returns the last token's kind. */
  #gap(pos: number, end: number, dropLast: false | ((kind: ts.SyntaxKind) => boolean)): ts.SyntaxKind | undefined {
    if (end <= pos) return undefined;
    scanner.setText(this.#sourceFile.text, pos, end - pos);
    let last: ts.SyntaxKind | undefined;
    for (
      let kind = scanner.scan();
      kind !== ts.SyntaxKind.EndOfFileToken && scanner.getTokenEnd() <= end;
      kind = scanner.scan()
    ) {
      this.tokens.push(scanner.getTokenText());
      last = kind;
    }
    if (last !== undefined && dropLast !== false && dropLast(last)) this.tokens.pop();
    return last;
  }
}

function tokenText(token: ts.Node, sourceFile: ts.SourceFile): string {
  if (ts.isStringLiteral(token)) {
    const parent = token.parent;
    const isPropertyName =
      parent !== undefined &&
      (ts.isPropertyAssignment(parent) ||
        ts.isPropertySignature(parent) ||
        ts.isPropertyDeclaration(parent) ||
        ts.isMethodDeclaration(parent) ||
        ts.isMethodSignature(parent) ||
        ts.isGetAccessorDeclaration(parent) ||
        ts.isSetAccessorDeclaration(parent)) &&
      parent.name === token;
    return isPropertyName && /^[A-Za-z_$][\w$]*$/.test(token.text) ? token.text : JSON.stringify(token.text);
  }
  const text = token.getText(sourceFile);
  if (ts.isNumericLiteral(token)) {
    const value = Number(text.replaceAll('_', ''));
    return Number.isNaN(value) ? text : String(value);
  }
  if (ts.isBigIntLiteral(token)) {
    try {
      return `${BigInt(text.slice(0, -1).replaceAll('_', ''))}n`;
    } catch {
      return text;
    }
  }
  return text;
}
