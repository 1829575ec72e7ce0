import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The file-size rule of DESIGN.md ("Module layering", "File size"): a product file (dsl/, codegen/,
// runtime/) over MAX_LINES lines says at its top why it is long, in a comment line that starts
// with "Long because". Checked on the tree, and on made-up files so that the check is seen to fail.

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Product code: what the package ships. */
const PRODUCT_DIRS = ['dsl', 'codegen', 'runtime'] as const;
const MAX_LINES = 400;
/** How far down "at its top" reaches, when the header comment is not right after the imports. */
const TOP_LINES = 15;
const MARKER = 'Long because';

function tsFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const relative = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return tsFiles(relative);
    return entry.name.endsWith('.ts') ? [relative] : [];
  });
}

/** A file's lines, as `wc -l` counts them (a last line break ends the last line). */
function linesOf(text: string): string[] {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

/** A comment line whose text (after `//`, `/*` or `*`) starts with the marker. */
const MARKER_LINE = new RegExp(`^\\s*(?://+|/\\*+|\\*)\\s*${MARKER}\\b`);

/**
 * The lines of the header comment: the first comment of the file, before the imports or right
 * after them (where the worker's headers are); empty when the file starts with code.
 */
function headerComment(lines: readonly string[]): readonly string[] {
  let i = 0;
  const skip = (): void => {
    while (
      i < lines.length &&
      (lines[i]!.trim() === '' || /^import\b/.test(lines[i]!) || /^\s+[\w{}, ]*,?$|^} from '/.test(lines[i]!))
    )
      i++;
  };
  skip();
  const start = i;
  if (lines[i]?.startsWith('//')) {
    while (lines[i]?.startsWith('//')) i++;
  } else if (lines[i]?.startsWith('/*')) {
    while (i < lines.length && !lines[i]!.includes('*/')) i++;
    i++;
  }
  return lines.slice(start, i);
}

/**
 * Whether a file of this text keeps the rule: it is at most MAX_LINES lines long, or a comment line
 * starting with "Long because" is at its top — in its first TOP_LINES lines or in its header comment.
 */
function saysWhyLong(text: string): boolean {
  const lines = linesOf(text);
  if (lines.length <= MAX_LINES) return true;
  return [...lines.slice(0, TOP_LINES), ...headerComment(lines)].some((line) => MARKER_LINE.test(line));
}

/** The product files that break the rule, with their lengths. */
function offenders(): string[] {
  return PRODUCT_DIRS.flatMap(tsFiles)
    .map((file) => ({ file, text: readFileSync(path.join(root, file), 'utf8') }))
    .filter(({ text }) => !saysWhyLong(text))
    .map(({ file, text }) => `${file} (${linesOf(text).length} lines)`)
    .sort();
}

const filler = (n: number): string => Array.from({ length: n }, (_, i) => `export const c${i} = ${i};\n`).join('');

describe('file size', () => {
  it(`every product file over ${MAX_LINES} lines says at its top why it is long`, () => {
    const files = PRODUCT_DIRS.flatMap(tsFiles);
    // A check that read nothing would pass too.
    expect(files.length).toBeGreaterThan(250);
    expect(
      offenders(),
      `Split each file along its seams into files that do one thing, or, if it truly does one thing, ` +
        `put a line starting with "${MARKER}" in its header comment (in its first ${TOP_LINES} lines, or right after the imports) saying why`,
    ).toEqual([]);
  });

  it('a file of at most 400 lines needs nothing, counted as `wc -l` counts', () => {
    expect(saysWhyLong(filler(MAX_LINES))).toBe(true);
    expect(saysWhyLong(filler(MAX_LINES).trimEnd())).toBe(true);
    expect(saysWhyLong(`${filler(MAX_LINES)}\n`)).toBe(false);
  });

  it('a longer file fails without the sentence, or with it too far down', () => {
    expect(saysWhyLong(filler(MAX_LINES + 1))).toBe(false);
    expect(saysWhyLong(`// What this file is.\n\n${filler(MAX_LINES)}`)).toBe(false);
    // "long because" inside a sentence is not the marker, nor is a marker in code or far below the top.
    expect(saysWhyLong(`// It is long because it is.\n${filler(MAX_LINES)}`)).toBe(false);
    expect(saysWhyLong(`export const why = 'Long because';\n${filler(MAX_LINES)}`)).toBe(false);
    expect(saysWhyLong(`${filler(20)}// Long because of the constants.\n${filler(MAX_LINES)}`)).toBe(false);
  });

  it('a longer file passes with a "Long because" line in its first lines or its header comment', () => {
    expect(saysWhyLong(`// What this file is.\n// Long because it is one table.\n\n${filler(MAX_LINES)}`)).toBe(true);
    expect(saysWhyLong(`/*\n * What this file is.\n * Long because it is one table.\n */\n${filler(MAX_LINES)}`)).toBe(
      true,
    );
    const imports = Array.from({ length: 20 }, (_, i) => `import { a${i} } from './a${i}.js';\n`).join('');
    expect(
      saysWhyLong(
        `${imports}\n/*\n * What this file is.\n *\n * Long because it is one table.\n */\n\n${filler(MAX_LINES)}`,
      ),
    ).toBe(true);
    expect(
      saysWhyLong(`${imports}\n// What this file is. Long because\n// it is one table.\n${filler(MAX_LINES)}`),
    ).toBe(false);
  });
});
