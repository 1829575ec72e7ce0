/**
 * Reads README.md into its fenced code blocks and the directive comment that stands on the line
 * right above each (`<!-- include: path#region -->`, `<!-- file: path -->`, …). The directive
 * says how the block is proven real; `readme.test.ts` enforces one for every block.
 */
export interface ReadmeBlock {
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly lang: string;
  readonly content: string;
  readonly directive: { readonly kind: string; readonly argument: string } | undefined;
}

const FENCE = /^(`{3,}|~{3,})\s*([\w-]*)\s*$/;
const DIRECTIVE = /^<!--\s*([a-z-]+):?\s*(.*?)\s*-->$/;

export function readmeBlocks(markdown: string): ReadmeBlock[] {
  const lines = markdown.split('\n');
  const blocks: ReadmeBlock[] = [];
  for (let i = 0; i < lines.length; i += 1) {
    const open = FENCE.exec(lines[i]!);
    if (open === null) continue;
    const fence = open[1]!;
    const start = i;
    const body: string[] = [];
    const closes = (line: string): boolean => {
      const trimmed = line.trim();
      return trimmed.length >= fence.length && trimmed === fence[0]!.repeat(trimmed.length);
    };
    for (i += 1; i < lines.length && !closes(lines[i]!); i += 1) body.push(lines[i]!);
    if (i >= lines.length) throw new Error(`README.md:${start + 1}: the code block opened here is never closed.`);
    const above = directiveAt(lines, start - 1);
    blocks.push({ line: start + 1, lang: open[2] ?? '', content: body.join('\n'), directive: above });
  }
  return blocks;
}

/** The directive comment on `line` (0-based), if that line is one. */
export function directiveAt(lines: readonly string[], line: number): ReadmeBlock['directive'] {
  const match = line >= 0 ? DIRECTIVE.exec(lines[line]!.trim()) : null;
  return match === null ? undefined : { kind: match[1]!, argument: match[2]! };
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
