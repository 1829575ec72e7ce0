import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { ts } from 'ts-morph';
import { DIRECTION_RULES, SOURCE_ROOTS, type DirectionRule, type Seam } from './dependency-rules.js';

/*
 * The import check of `npm run check:deps`, in three stages: read every import of the product code
 * into a list of edges (TypeScript's parser from ts-morph, one file at a time, no program), find
 * the cycles and the imports the rules forbid (scripts/dependency-rules.ts), report. A small check
 * of our own rather than dependency-cruiser or madge: dependency-cruiser 18 needs Node 22, 17 reads
 * TypeScript only through a `typescript` below 7, madge wants typescript 5 as a peer — and the
 * repository compiles with typescript 7, whose package has no compiler API. ts-morph brings its
 * own compiler and is a dependency already.
 */

export type DependencyCode =
  /** An import cycle. */
  | 'DEP001'
  /** An import a direction rule forbids. */
  | 'DEP002'
  /** A relative import that names no file. */
  | 'DEP003'
  /** A seam that matches no import. */
  | 'DEP004';

export interface DependencyDiagnostic {
  readonly code: DependencyCode;
  /** Relative to the repository, forward slashes. */
  readonly file: string;
  readonly line: number;
  readonly col: number;
  /** Says what is wrong and what to do about it. */
  readonly message: string;
}

/** One import of one file: `from` imports `to` (both relative to the repository). */
export interface ImportEdge {
  readonly from: string;
  readonly to: string;
  /** `import type`, `export type` or an `import('…')` type: nothing of `to` is loaded. */
  readonly typeOnly: boolean;
  readonly line: number;
  readonly col: number;
}

export interface DependencyCheck {
  /** The product files read. */
  readonly files: readonly string[];
  readonly edges: readonly ImportEdge[];
  readonly diagnostics: readonly DependencyDiagnostic[];
}

const RULES_FILE = 'scripts/dependency-rules.ts';

/** Reads the imports under `root` and checks them against `rules`. */
export function checkDependencies(root: string, rules: readonly DirectionRule[] = DIRECTION_RULES): DependencyCheck {
  const files = SOURCE_ROOTS.flatMap((dir) => sourceFiles(root, dir)).sort();
  const packageEntries = ownEntryPoints(root);
  const edges: ImportEdge[] = [];
  const diagnostics: DependencyDiagnostic[] = [];
  for (const file of files) {
    for (const found of importsOf(root, file)) {
      const to = resolveSpecifier(root, file, found.specifier, packageEntries);
      if (to === undefined) {
        diagnostics.push({
          code: 'DEP003',
          file,
          line: found.line,
          col: found.col,
          message: `"${found.specifier}" names no file: fix the path (a relative import names the .js of the .ts file it imports).`,
        });
      } else if (to !== null) {
        edges.push({ from: file, to, typeOnly: found.typeOnly, line: found.line, col: found.col });
      }
    }
  }
  diagnostics.push(...cycleDiagnostics(files, edges), ...ruleDiagnostics(edges, rules));
  diagnostics.sort(compareDiagnostics);
  return { files, edges, diagnostics };
}

/** `file:line:col - error CODE: message`, as codegen reports its diagnostics. */
export function formatDiagnostic(d: DependencyDiagnostic): string {
  return `${d.file}:${d.line}:${d.col} - error ${d.code}: ${d.message}`;
}

function sourceFiles(root: string, dir: string): string[] {
  const absolute = path.join(root, dir);
  if (!existsSync(absolute)) return [];
  return readdirSync(absolute, { recursive: true, encoding: 'utf8' })
    .map((name) => `${dir}/${name.split(path.sep).join('/')}`)
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts') && statSync(path.join(root, file)).isFile());
}

interface FoundImport {
  readonly specifier: string;
  readonly typeOnly: boolean;
  readonly line: number;
  readonly col: number;
}

function importsOf(root: string, file: string): FoundImport[] {
  const source = ts.createSourceFile(file, readFileSync(path.join(root, file), 'utf8'), ts.ScriptTarget.Latest, true);
  const found: FoundImport[] = [];
  const add = (literal: ts.Node, typeOnly: boolean): void => {
    if (!ts.isStringLiteralLike(literal)) return;
    const { line, character } = source.getLineAndCharacterOfPosition(literal.getStart(source));
    found.push({ specifier: literal.text, typeOnly, line: line + 1, col: character + 1 });
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) add(node.moduleSpecifier, node.importClause?.isTypeOnly === true);
    else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined)
      add(node.moduleSpecifier, node.isTypeOnly);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal, true);
    else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined
    ) {
      add(node.arguments[0], false);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** `ledgerflow/<entry>` → the entry's source file, from package.json `exports` (`ledgerflow-source`). */
function ownEntryPoints(root: string): Map<string, string> {
  const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    name: string;
    exports?: Record<string, unknown>;
  };
  const entries = new Map<string, string>();
  for (const [subpath, target] of Object.entries(manifest.exports ?? {})) {
    const source =
      typeof target === 'object' && target !== null
        ? (target as Record<string, unknown>)['ledgerflow-source']
        : undefined;
    if (typeof source === 'string') entries.set(`${manifest.name}${subpath.slice(1)}`, path.posix.normalize(source));
  }
  return entries;
}

/** The file a specifier names (relative to the repository); `null` for a package; `undefined` for nothing. */
function resolveSpecifier(
  root: string,
  from: string,
  specifier: string,
  packageEntries: ReadonlyMap<string, string>,
): string | null | undefined {
  if (!specifier.startsWith('.')) return packageEntries.get(specifier) ?? null;
  const target = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  const candidates = target.endsWith('.js') ? [`${target.slice(0, -3)}.ts`, target] : [target];
  return candidates.find(
    (candidate) => existsSync(path.join(root, candidate)) && statSync(path.join(root, candidate)).isFile(),
  );
}

/** One diagnostic per strongly connected component: its shortest cycle through its first file. */
function cycleDiagnostics(files: readonly string[], edges: readonly ImportEdge[]): DependencyDiagnostic[] {
  const next = new Map<string, ImportEdge[]>(files.map((file) => [file, []]));
  for (const edge of edges) next.get(edge.from)?.push(edge);
  return stronglyConnected(files, next)
    .filter((component) => component.length > 1 || next.get(component[0]!)!.some((e) => e.to === component[0]))
    .map((component): DependencyDiagnostic => {
      const members = new Set(component);
      const start = [...component].sort()[0]!;
      const cycle = shortestCycle(start, members, next);
      const first = cycle[0]!;
      const more =
        component.length > cycle.length
          ? ` (${component.length} files are in this knot; this is its shortest cycle through ${start})`
          : '';
      return {
        code: 'DEP001',
        file: first.from,
        line: first.line,
        col: first.col,
        message:
          `import cycle: ${[...cycle.map((e) => e.from), start].join(' → ')}${more}. ` +
          'Move what both sides need to one module below both (DESIGN.md, "Module layering"); a type-only import counts too.',
      };
    });
}

/** Tarjan's algorithm, iteratively: the strongly connected components of the import graph. */
function stronglyConnected(files: readonly string[], next: ReadonlyMap<string, readonly ImportEdge[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  for (const root of files) {
    if (index.has(root)) continue;
    const work: Array<{ file: string; edge: number }> = [{ file: root, edge: 0 }];
    index.set(root, index.size);
    low.set(root, index.get(root)!);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const frame = work.at(-1)!;
      const out = next.get(frame.file) ?? [];
      if (frame.edge < out.length) {
        const to = out[frame.edge++]!.to;
        if (!next.has(to)) continue;
        if (!index.has(to)) {
          index.set(to, index.size);
          low.set(to, index.get(to)!);
          stack.push(to);
          onStack.add(to);
          work.push({ file: to, edge: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.file, Math.min(low.get(frame.file)!, index.get(to)!));
        }
        continue;
      }
      work.pop();
      const parent = work.at(-1);
      if (parent !== undefined) low.set(parent.file, Math.min(low.get(parent.file)!, low.get(frame.file)!));
      if (low.get(frame.file) === index.get(frame.file)) {
        const component: string[] = [];
        let file: string;
        do {
          file = stack.pop()!;
          onStack.delete(file);
          component.push(file);
        } while (file !== frame.file);
        components.push(component);
      }
    }
  }
  return components;
}

/** The edges of a shortest path from `start` back to itself inside `members` (breadth first). */
function shortestCycle(
  start: string,
  members: ReadonlySet<string>,
  next: ReadonlyMap<string, readonly ImportEdge[]>,
): ImportEdge[] {
  const via = new Map<string, ImportEdge>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    for (const edge of next.get(queue[i]!) ?? []) {
      if (!members.has(edge.to)) continue;
      if (edge.to === start) {
        const cycle = [edge];
        for (let at = edge.from; at !== start; at = via.get(at)!.from) cycle.unshift(via.get(at)!);
        return cycle;
      }
      if (!via.has(edge.to)) {
        via.set(edge.to, edge);
        queue.push(edge.to);
      }
    }
  }
  throw new Error(`no cycle through ${start} in its own strongly connected component`);
}

function ruleDiagnostics(edges: readonly ImportEdge[], rules: readonly DirectionRule[]): DependencyDiagnostic[] {
  const diagnostics: DependencyDiagnostic[] = [];
  const used = new Set<Seam>();
  for (const edge of edges) {
    for (const rule of rules) {
      if (
        !rule.from.some((prefix) => edge.from.startsWith(prefix)) ||
        !rule.to.some((prefix) => edge.to.startsWith(prefix))
      )
        continue;
      const seam = rule.seams?.find((s) => s.from === edge.from && s.to === edge.to);
      if (seam !== undefined) used.add(seam);
      if (seam !== undefined && (seam.typeOnly !== true || edge.typeOnly)) continue;
      const typeOnlySeam =
        seam !== undefined
          ? ` The seam in ${RULES_FILE} allows \`import type\` here, nothing that loads the module.`
          : '';
      diagnostics.push({
        code: 'DEP002',
        file: edge.from,
        line: edge.line,
        col: edge.col,
        message: `${edge.from} imports ${edge.to}, but ${rule.says}.${typeOnlySeam} If this import must stay, add it with its reason to the rule's seams in ${RULES_FILE}.`,
      });
    }
  }
  const ruleLines = readFileSync(new URL('./dependency-rules.ts', import.meta.url), 'utf8').split('\n');
  for (const rule of rules) {
    for (const seam of rule.seams ?? []) {
      if (used.has(seam)) continue;
      const at = ruleLines.findIndex(
        (line, i) => line.includes(`from: '${seam.from}'`) && ruleLines[i + 1]?.includes(`to: '${seam.to}'`) === true,
      );
      diagnostics.push({
        code: 'DEP004',
        file: RULES_FILE,
        line: at + 1 || 1,
        col: 1,
        message: `the seam ${seam.from} → ${seam.to} matches no import any more: delete it from ${RULES_FILE}.`,
      });
    }
  }
  return diagnostics;
}

function compareDiagnostics(a: DependencyDiagnostic, b: DependencyDiagnostic): number {
  if (a.file !== b.file) return a.file < b.file ? -1 : 1;
  return (
    a.line - b.line ||
    a.col - b.col ||
    (a.code < b.code ? -1 : a.code > b.code ? 1 : 0) ||
    (a.message < b.message ? -1 : a.message > b.message ? 1 : 0)
  );
}
