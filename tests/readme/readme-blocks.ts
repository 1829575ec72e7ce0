import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * Reads the user documentation — README.md and every docs/**\/*.md — into its fenced code blocks
 * and the directive comment that stands on the line right above each (`<!-- include: path#region -->`,
 * `<!-- file: path -->`, …). The directive says how the block is proven real; `readme.test.ts`
 * enforces one for every block, in every file.
 */
export interface ReadmeBlock {
  /** The Markdown file, relative to the repository root (`README.md`, `docs/tutorial/05-run-a-worker.md`). */
  readonly file: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly lang: string;
  readonly content: string;
  readonly directive: { readonly kind: string; readonly argument: string } | undefined;
}

/** One Markdown file of the user documentation. */
export interface DocFile {
  /** Relative to the repository root, with forward slashes. */
  readonly path: string;
  readonly text: string;
}

const FENCE = /^(`{3,}|~{3,})\s*([\w-]*)\s*$/;
const DIRECTIVE = /^<!--\s*([a-z-]+):?\s*(.*?)\s*-->$/;

/** README.md first, then every Markdown file under docs/, in path order. */
export function docFiles(root: string): DocFile[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.md')) found.push(relative(root, path).split('\\').join('/'));
    }
  };
  walk(join(root, 'docs'));
  return ['README.md', ...found.sort()].map((path) => ({ path, text: readFileSync(join(root, path), 'utf8') }));
}

/** Line indexes (0-based) of `markdown` that are inside a fenced code block, fences included. */
function fencedLines(lines: readonly string[]): Set<number> {
  const inside = new Set<number>();
  for (let i = 0; i < lines.length; i += 1) {
    const open = FENCE.exec(lines[i]!);
    if (open === null) continue;
    const fence = open[1]!;
    inside.add(i);
    for (i += 1; i < lines.length && !closes(lines[i]!, fence); i += 1) inside.add(i);
    inside.add(i);
  }
  return inside;
}

function closes(line: string, fence: string): boolean {
  const trimmed = line.trim();
  return trimmed.length >= fence.length && trimmed === fence[0]!.repeat(trimmed.length);
}

export function readmeBlocks(markdown: string, file = 'README.md'): ReadmeBlock[] {
  const lines = markdown.split('\n');
  const blocks: ReadmeBlock[] = [];
  for (let i = 0; i < lines.length; i += 1) {
    const open = FENCE.exec(lines[i]!);
    if (open === null) continue;
    const fence = open[1]!;
    const start = i;
    const body: string[] = [];
    for (i += 1; i < lines.length && !closes(lines[i]!, fence); i += 1) body.push(lines[i]!);
    if (i >= lines.length) throw new Error(`${file}:${start + 1}: the code block opened here is never closed.`);
    const above = directiveAt(lines, start - 1);
    blocks.push({ file, line: start + 1, lang: open[2] ?? '', content: body.join('\n'), directive: above });
  }
  return blocks;
}

/** The directive comment on `line` (0-based), if that line is one. */
export function directiveAt(lines: readonly string[], line: number): ReadmeBlock['directive'] {
  const match = line >= 0 ? DIRECTIVE.exec(lines[line]!.trim()) : null;
  return match === null ? undefined : { kind: match[1]!, argument: match[2]! };
}

/**
 * The anchors GitHub gives the headings of `markdown` (outside code blocks): the heading's text
 * without its Markdown, lower-cased, punctuation dropped, spaces as hyphens; a repeated one gets
 * `-1`, `-2`, …
 */
export function headingAnchors(markdown: string): Set<string> {
  const lines = markdown.split('\n');
  const fenced = fencedLines(lines);
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  lines.forEach((line, i) => {
    const heading = fenced.has(i) ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading === null) return;
    const text = heading[1]!.replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, '');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  });
  return anchors;
}

/** The targets of the Markdown links of `markdown` (outside code blocks), with their 1-based line. */
export function markdownLinks(markdown: string): Array<{ readonly line: number; readonly target: string }> {
  const lines = markdown.split('\n');
  const fenced = fencedLines(lines);
  return lines.flatMap((line, i) =>
    fenced.has(i) ? [] : [...line.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => ({ line: i + 1, target: m[1]! })),
  );
}

/**
 * The text between `// #region name` and `// #endregion name` (either comment style), exactly
 * as it stands in the file; the whole file when `name` is undefined.
 */
export function fileRegion(text: string, name: string | undefined, where: string): string {
  if (name === undefined) return text.replace(/\n$/, '');
  const lines = text.split('\n');
  const marker = (kind: 'region' | 'endregion') => (line: string) =>
    new RegExp(`^\\s*(//|#|--|<!--)\\s*#${kind} ${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\b`).test(line);
  const start = lines.findIndex(marker('region'));
  const end = lines.findIndex(marker('endregion'));
  if (start === -1 || end === -1 || end < start) {
    throw new Error(`${where}: no "#region ${name}" … "#endregion ${name}" pair in the file.`);
  }
  return lines.slice(start + 1, end).join('\n');
}
