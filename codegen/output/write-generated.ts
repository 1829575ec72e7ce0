import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { DO_NOT_EDIT, MIGRATIONS_DIR, type GeneratedFile } from '../emit/generated-file.js';
import { isDraftMigration } from '../emit/workflow-version-sql.js';
import { extraContracts } from './compare-generated.js';

export interface WriteResult {
  /** Files created or changed, relative to the root. */
  readonly written: readonly string[];
  /** Stale contracts removed, relative to the root. */
  readonly removed: readonly string[];
}

/**
 * Writes what changed and removes contracts of workflows that are gone (only files that carry
 * the DO-NOT-EDIT header). Unchanged files are not touched.
 */
export function writeGenerated(root: string, outDir: string, files: readonly GeneratedFile[]): WriteResult {
  const written: string[] = [];
  for (const file of files) {
    const relative = `${outDir}/${file.path}`;
    const absolute = path.join(root, relative);
    const exists = existsSync(absolute);
    if (exists && readFileSync(absolute, 'utf8') === file.content) continue;
    if (exists && file.path.startsWith(`${MIGRATIONS_DIR}/`) && !isDraftMigration(readFileSync(absolute, 'utf8'))) {
      // The migration planner schedules no existing file but a draft's; reaching this is a codegen bug.
      throw new Error(`Refusing to rewrite existing migration ${relative}: migrations are append-only.`);
    }
    mkdirSync(path.dirname(absolute), { recursive: true });
    writeFileSync(absolute, file.content);
    written.push(relative);
  }
  const removed: string[] = [];
  for (const extra of extraContracts(root, outDir, files)) {
    const absolute = path.join(root, extra);
    if (!readFileSync(absolute, 'utf8').includes(DO_NOT_EDIT)) continue;
    rmSync(absolute);
    removed.push(extra);
  }
  return { written, removed };
}
