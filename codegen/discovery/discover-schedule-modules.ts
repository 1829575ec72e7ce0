import { readFileSync } from 'node:fs';
import path from 'node:path';
import { discoverSourceModules, discoverSourceModulesSync, importSpecifiers } from './source-modules.js';

export interface ScheduleDiscoveryOptions {
  /** Absolute directory that globs and reported paths are relative to. */
  readonly root: string;
  /** Output directory relative to the root; never searched. */
  readonly outDir: string;
  /** The workflow files codegen reads, relative to the root. */
  readonly workflowFiles: readonly string[];
}

/**
 * Finds the modules that may declare schedules of the workflows codegen reads: TypeScript sources
 * under the root (skipped as for handler modules) that mention `schedule(` and import, by a
 * relative specifier, one of the workflow files — a schedule names the workflow it starts, so its
 * module imports that declaration. The workflow files themselves are read for schedules anyway.
 * A text prefilter: whether a file declares a schedule with `schedule` from ledgerflow/dsl is
 * decided when it is parsed.
 *
 * @example
 * await discoverScheduleModules({ root: '/repo', outDir: 'generated', workflowFiles: ['src/report.workflow.ts'] });
 * // ['src/schedules.ts'] (relative, sorted)
 */
export async function discoverScheduleModules(options: ScheduleDiscoveryOptions): Promise<string[]> {
  return scheduleModulesAmong(options, await discoverSourceModules(options.root, options.outDir));
}

/** `discoverScheduleModules` for callers that cannot wait (the TypeScript language-service plugin). */
export function discoverScheduleModulesSync(options: ScheduleDiscoveryOptions): string[] {
  return scheduleModulesAmong(options, discoverSourceModulesSync(options.root, options.outDir));
}

function scheduleModulesAmong(options: ScheduleDiscoveryOptions, files: readonly string[]): string[] {
  const workflows = new Set(options.workflowFiles.map((file) => withoutExtension(path.resolve(options.root, file))));
  const found: string[] = [];
  for (const file of files) {
    const absolute = path.join(options.root, file);
    if (workflows.has(withoutExtension(absolute))) continue;
    const text = readFileSync(absolute, 'utf8');
    if (text.includes('schedule(') && importsWorkflowFile(absolute, text, workflows)) found.push(file);
  }
  return found.sort();
}

function importsWorkflowFile(file: string, text: string, workflows: ReadonlySet<string>): boolean {
  for (const specifier of importSpecifiers(text)) {
    if (specifier.startsWith('.') && workflows.has(withoutExtension(path.resolve(path.dirname(file), specifier))))
      return true;
  }
  return false;
}

/** `a/b.workflow.js` and `a/b.workflow.ts` name one module. */
function withoutExtension(file: string): string {
  return file.replace(/\.(m|c)?(j|t)sx?$/, '');
}
