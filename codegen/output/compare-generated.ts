import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { CONTRACTS_DIR, type GeneratedFile } from '../emit/generated-file.js';

/** A generated file that is not on disk as codegen would write it. `file` is relative to the root. */
export interface FileDifference {
  readonly file: string;
  readonly status: 'stale' | 'missing' | 'extra';
}

/**
 * What `--check` reports: files whose content differs, files not written yet, and contracts of
 * workflows that no longer exist. Migrations already on disk are not compared: they are
 * append-only history, never regenerated.
 */
export function compareGenerated(root: string, outDir: string, files: readonly GeneratedFile[]): FileDifference[] {
  const differences: FileDifference[] = [];
  for (const file of files) {
    const relative = `${outDir}/${file.path}`;
    const absolute = path.join(root, relative);
    if (!existsSync(absolute)) differences.push({ file: relative, status: 'missing' });
    else if (readFileSync(absolute, 'utf8') !== file.content) differences.push({ file: relative, status: 'stale' });
  }
  for (const extra of extraContracts(root, outDir, files)) differences.push({ file: extra, status: 'extra' });
  return differences.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));
}

/** Contract modules on disk that no workflow produces any more, relative to the root. */
export function extraContracts(root: string, outDir: string, files: readonly GeneratedFile[]): string[] {
  const directory = path.join(root, outDir, CONTRACTS_DIR);
  if (!existsSync(directory)) return [];
  const expected = new Set(files.map((f) => f.path));
  return readdirSync(directory)
    .filter((name) => name.endsWith('.ts') && !expected.has(`${CONTRACTS_DIR}/${name}`))
    .sort()
    .map((name) => `${outDir}/${CONTRACTS_DIR}/${name}`);
}
