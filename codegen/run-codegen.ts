import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import type { SourceCache } from './analysis/analysis-program.js';
import { analyzeWorkflows } from './analysis/analyze-workflows.js';
import { discoverHandlerModules } from './discovery/discover-handler-modules.js';
import { discoverScheduleModules } from './discovery/discover-schedule-modules.js';
import {
  DEFAULT_INCLUDE,
  DEFAULT_OUT_DIR,
  discoverWorkflowFiles,
  toPosix,
} from './discovery/discover-workflow-files.js';
import { emitGenerated } from './emit/emit-generated.js';
import type { DraftVersions } from './emit/migrations.js';
import { MIGRATIONS_DIR, type GeneratedFile } from './emit/generated-file.js';
import { WORKFLOW_NAME } from '../dsl/names.js';
import { contractFileName } from './emit/naming.js';
import { hasErrors, type Diagnostic } from './model/diagnostic.js';
import { MANIFEST_FILE_NAME, parseManifest, type CommittedManifest } from './model/manifest.js';
import { compareLocations } from './model/source-location.js';
import type { Suppression } from './model/suppression.js';
import type { AnalysisResult } from './model/workflow-model.js';
import { unpinnedPartNotes } from './validation/rules/unbumped-version.js';
import { validateWorkflowsWithSuppressions } from './validation/validate-workflows.js';

export interface CodegenOptions {
  /** Directory to search and to resolve `outDir` against. Default: the current directory. */
  readonly root?: string;
  /** Globs of workflow files, relative to the root. Default: `**\/*.workflow.ts`. */
  readonly include?: readonly string[];
  /** Output directory relative to the root. Default: `generated`. */
  readonly outDir?: string;
  /**
   * Workflow versions to retire, as `name@version` (`orders@1`): each leaves the manifest, so that
   * LF009 no longer asks for its declaration and its contract is deleted. Each must be in the
   * manifest and no longer declared. Default: none.
   */
  readonly retire?: readonly string[];
  /**
   * Workflow versions to release, as `name@version`: each loses `draft` in the manifest and its
   * migration its draft form, and from then on LF007 pins it. Each must be declared. A version new to
   * the manifest starts as a draft; entries without `draft` are released. Default: none.
   */
  readonly release?: readonly string[];
  /**
   * Sources parsed by an earlier run with the same cache, reused where their text is unchanged:
   * what keeps `codegen --watch` fast. Default: none (everything is parsed).
   */
  readonly cache?: SourceCache;
}

/** The options of `runCodegen` that it checks, named as `CodegenOptions` spells them. */
export type CheckedCodegenOption = 'root' | 'outDir' | 'retire' | 'release';

/**
 * `runCodegen` cannot use the options it was given. The message names options as the API
 * spells them (`root`, `outDir`); a front end with other names for them (the CLI's `--root`,
 * `--out`) words the same problem with `describeOptionsError`. A RangeError, as before it had
 * its own type.
 */
export class CodegenOptionsError extends RangeError {
  override readonly name = 'CodegenOptionsError';
  /** The option that is wrong. */
  readonly option: CheckedCodegenOption;
  /** The root directory, resolved to an absolute path. */
  readonly root: string;
  /** The value given for `option` (for `root`, resolved to an absolute path). */
  readonly value: string;
  /** For `retire`: why the version cannot be retired (a sentence that ends the message); null when the value is malformed. */
  readonly reason: string | null;

  constructor(option: CheckedCodegenOption, root: string, value: string, reason: string | null = null) {
    super(
      describeOptionsProblem(option, root, value, reason, {
        root: 'root',
        outDir: 'outDir',
        retire: 'retire',
        release: 'release',
      }),
    );
    this.option = option;
    this.root = root;
    this.value = value;
    this.reason = reason;
  }
}

/** The error's message with each option called by `names` (e.g. the CLI's flags). */
export function describeOptionsError(
  error: CodegenOptionsError,
  names: Readonly<Record<CheckedCodegenOption, string>>,
): string {
  return describeOptionsProblem(error.option, error.root, error.value, error.reason, names);
}

function describeOptionsProblem(
  option: CheckedCodegenOption,
  root: string,
  value: string,
  reason: string | null,
  names: Readonly<Record<CheckedCodegenOption, string>>,
): string {
  switch (option) {
    case 'root':
      return `${names.root} must be an existing directory; "${value}" is not one.`;
    case 'outDir':
      return `${names.outDir} must be a directory inside ${names.root} (${root}); got "${value}".`;
    case 'retire':
    case 'release':
      return reason === null
        ? `${names[option]} takes a workflow version as <name>@<version> (e.g. orders@1); got "${value}".`
        : `${names[option]} ${value}: ${reason}`;
  }
}

export interface CodegenRun {
  readonly root: string;
  /** The globs that found the workflow files. */
  readonly include: readonly string[];
  /** Output directory relative to the root, forward slashes. */
  readonly outDir: string;
  readonly analysis: AnalysisResult;
  /** Every diagnostic, sorted (but those a `// ledgerflow-ignore` comment suppresses). */
  readonly diagnostics: readonly Diagnostic[];
  /** The `// ledgerflow-ignore` comments in effect, with what each suppressed, sorted by location. */
  readonly suppressions: readonly Suppression[];
  /** What codegen would write; null when there are errors (nothing is generated from an invalid model). */
  readonly generated: readonly GeneratedFile[] | null;
  /**
   * What the user should know that is not a problem, one sentence each: versions retired, parts
   * pinned for the first time in a manifest from an earlier release. Empty when there are errors.
   */
  readonly notes: readonly string[];
}

/**
 * The composition root: discovery → analysis → validation → emission, all in memory. Writing
 * (`writeGenerated`) and comparing (`compareGenerated`) are separate, so `--check` and the
 * tests run exactly what `codegen` runs.
 *
 * @example
 * const run = await runCodegen({ root: '/repo' });
 * if (run.generated !== null) writeGenerated(run.root, run.outDir, run.generated);
 *
 * @throws CodegenOptionsError when `root` is not a directory, `outDir` is not inside it, or a
 *   `retire` value is malformed, not in the manifest or still declared.
 */
export async function runCodegen(options: CodegenOptions = {}): Promise<CodegenRun> {
  const root = path.resolve(options.root ?? process.cwd());
  if (!existsSync(root) || !statSync(root).isDirectory()) {
    throw new CodegenOptionsError('root', root, root);
  }
  const outDir = normalizeOutDir(root, options.outDir ?? DEFAULT_OUT_DIR);
  const retire = (options.retire ?? []).map((value) => parseVersionOption('retire', root, value));
  const release = (options.release ?? []).map((value) => parseVersionOption('release', root, value));
  const include = options.include ?? DEFAULT_INCLUDE;
  const files = await discoverWorkflowFiles({ root, include, outDir });
  const analysis = analyzeWorkflows(root, files, {
    outDir,
    handlerModules: await discoverHandlerModules({ root, outDir }),
    scheduleModules: await discoverScheduleModules({ root, outDir, workflowFiles: files }),
    ...(options.cache === undefined ? {} : { cache: options.cache }),
  });
  const retirement = retireVersions(root, readCommittedManifest(root, outDir), analysis, retire);
  const committedManifest = retirement.manifest;
  const versions = draftVersions(root, committedManifest, analysis, release);
  const { diagnostics, suppressions } = validateWorkflowsWithSuppressions({ analysis, committedManifest });
  const generated = hasErrors(diagnostics)
    ? null
    : emitGenerated({
        workflows: analysis.workflows,
        outDir,
        existingMigrations: readExistingMigrations(root, outDir),
        suppressions,
        versions,
      });
  const notes =
    generated === null
      ? []
      : [
          ...retirement.retired.map(
            (entry) =>
              `retired workflow "${entry.name}" v${entry.version}: it leaves the manifest and its contract ${outDir}/${contractFileName(entry)} is removed` +
              `${entry.migration === '' ? '' : `; its migration ${outDir}/${MIGRATIONS_DIR}/${entry.migration} stays (migrations are append-only)`}.`,
          ),
          ...unpinnedPartNotes(analysis.workflows, committedManifest),
          ...versions.released.map(({ name, version, before }) =>
            before === 'released'
              ? `workflow "${name}" v${version} was already released; nothing changed.`
              : `released workflow "${name}" v${version}: from now on a change to it needs a new version (LF007); commit the manifest and its migration.`,
          ),
        ];
  return { root, include, outDir, analysis, diagnostics, suppressions, generated, notes };
}

interface VersionToRetire {
  readonly value: string;
  readonly name: string;
  readonly version: number;
}

function parseVersionOption(option: 'retire' | 'release', root: string, value: string): VersionToRetire {
  const match = /^(.+)@([1-9]\d*)$/.exec(value);
  if (match === null || !WORKFLOW_NAME.test(match[1]!)) throw new CodegenOptionsError(option, root, value);
  return { value, name: match[1]!, version: Number(match[2]) };
}

/**
 * Which declared versions are drafts: those new to the manifest and those it lists as drafts, but
 * the versions to release (each must be declared). Entries without `draft` stay released.
 */
function draftVersions(
  root: string,
  committed: CommittedManifest,
  analysis: AnalysisResult,
  release: readonly VersionToRetire[],
): DraftVersions & { released: { name: string; version: number; before: 'draft' | 'new' | 'released' }[] } {
  const entries = committed.status === 'present' ? committed.manifest.workflows : [];
  const entryOf = (w: { name: string; version: number }) =>
    entries.find((e) => e.name === w.name && e.version === w.version);
  const released = release.map(({ value, name, version }) => {
    if (!analysis.workflows.some((w) => w.name === name && w.version === version)) {
      throw new CodegenOptionsError(
        'release',
        root,
        value,
        `workflow "${name}" v${version} is not declared; declare it, then release it.`,
      );
    }
    const entry = entryOf({ name, version });
    return {
      name,
      version,
      before:
        entry === undefined ? ('new' as const) : entry.draft === true ? ('draft' as const) : ('released' as const),
    };
  });
  const releasing = new Set(released.map((r) => `${r.name}@${r.version}`));
  const drafts = new Set(
    analysis.workflows
      .filter(
        (w) => !releasing.has(`${w.name}@${w.version}`) && (entryOf(w) === undefined || entryOf(w)!.draft === true),
      )
      .map((w) => `${w.name}@${w.version}`),
  );
  const draftedBefore = new Set(entries.filter((e) => e.draft === true).map((e) => `${e.name}@${e.version}`));
  return { drafts, draftedBefore, released };
}

/**
 * The committed manifest without the versions to retire, each of which must be in it and no
 * longer declared (retiring a declared version would unpin it under runs in flight).
 */
function retireVersions(
  root: string,
  committed: CommittedManifest,
  analysis: AnalysisResult,
  retire: readonly VersionToRetire[],
): { manifest: CommittedManifest; retired: { name: string; version: number; migration: string }[] } {
  for (const { value, name, version } of retire) {
    const declared = analysis.workflows
      .filter((w) => w.name === name && w.version === version)
      .sort((a, b) => compareLocations(a.location, b.location))[0];
    if (declared !== undefined) {
      const { file, line, col } = declared.location;
      throw new CodegenOptionsError(
        'retire',
        root,
        value,
        `workflow "${name}" v${version} is still declared (${file}:${line}:${col}); only a version that is no longer declared can be retired.`,
      );
    }
    if (
      committed.status !== 'present' ||
      !committed.manifest.workflows.some((e) => e.name === name && e.version === version)
    ) {
      const where =
        committed.status === 'absent'
          ? 'there is no manifest'
          : committed.status === 'invalid'
            ? `${committed.file} cannot be read`
            : `it is not in ${committed.file}`;
      throw new CodegenOptionsError('retire', root, value, `${where}, so there is nothing to retire.`);
    }
  }
  if (retire.length === 0 || committed.status !== 'present') return { manifest: committed, retired: [] };
  const isRetired = (e: { name: string; version: number }): boolean =>
    retire.some((r) => r.name === e.name && r.version === e.version);
  const entries = committed.manifest.workflows.map((entry, index) => ({
    entry,
    line: committed.entryLines[index] ?? 1,
  }));
  const kept = entries.filter(({ entry }) => !isRetired(entry));
  return {
    manifest: {
      ...committed,
      manifest: { ...committed.manifest, workflows: kept.map((k) => k.entry) },
      entryLines: kept.map((k) => k.line),
    },
    retired: entries
      .filter(({ entry }) => isRetired(entry))
      .map(({ entry }) => ({
        name: entry.name,
        version: entry.version,
        migration: typeof entry.migration === 'string' ? entry.migration : '',
      })),
  };
}

/**
 * The output directory relative to the root; it must lie inside it (generated imports are
 * relative). Throws CodegenOptionsError otherwise.
 */
export function normalizeOutDir(root: string, outDir: string): string {
  const relative = toPosix(path.relative(root, path.resolve(root, outDir)));
  if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) {
    throw new CodegenOptionsError('outDir', root, outDir);
  }
  return relative;
}

/** The manifest committed in the output directory, as read (absent, invalid or present). */
export function readCommittedManifest(root: string, outDir: string): CommittedManifest {
  const relative = `${outDir}/${MANIFEST_FILE_NAME}`;
  const absolute = path.join(root, relative);
  if (!existsSync(absolute)) return { status: 'absent' };
  return parseManifest(relative, readFileSync(absolute, 'utf8'));
}

function readExistingMigrations(root: string, outDir: string): string[] {
  const directory = path.join(root, outDir, MIGRATIONS_DIR);
  return existsSync(directory)
    ? readdirSync(directory)
        .filter((name) => name.endsWith('.sql'))
        .sort()
    : [];
}
