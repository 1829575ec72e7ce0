/**
 * The public API's reports (`npm run check:api`): for each entry point of package.json's `exports`
 * that has types, API Extractor's report of what it exports — every name with its kind and
 * signature, in a stable order — compared with the one committed under api/ (STYLE.md 17: widening
 * the surface is a decision a reviewer sees in the diff).
 *
 * API Extractor reads declarations, not sources: the check emits the declarations of
 * tsconfig.build.json (as `npm run build` does, declarations only) into a scratch folder under
 * .tmp/, runs the extractor on each entry point's `.d.ts` with the TypeScript it bundles, and
 * diffs the report it writes with the committed one. Release tags (`@public`, `@beta`) are not
 * used, so their absence is not reported; neither is a missing doc comment (the report marks the
 * declaration `(undocumented)`), an unresolved `{@link}` nor TSDoc syntax. A type an entry point's
 * signatures use without exporting it stays in the report, marked by the extractor as a "forgotten
 * export".
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  Extractor,
  ExtractorConfig,
  ExtractorLogLevel,
  type ExtractorMessage,
  type IConfigFile,
} from '@microsoft/api-extractor';

/** One entry point of `exports` that has types: `ledgerflow/runtime`, reported in api/runtime.api.md. */
export interface ApiEntryPoint {
  /** The import specifier: `ledgerflow/runtime`. */
  readonly specifier: string;
  /** The report's base name: `runtime` (the subpath, `/` written as `-`). */
  readonly reportName: string;
  /** Its declaration file relative to dist/: `runtime/index.d.ts`. */
  readonly declaration: string;
}

export type ApiDiagnosticCode = 'API001' | 'API002' | 'API003' | 'API004';

/**
 * - API001: an entry point's exports differ from its committed report.
 * - API002: an entry point has no committed report.
 * - API003: a committed report names no entry point of `exports`.
 * - API004: the extractor could not read an entry point's declarations.
 */
export interface ApiDiagnostic {
  readonly code: ApiDiagnosticCode;
  /** The report file, relative to the repository: `api/runtime.api.md`. */
  readonly file: string;
  readonly message: string;
  /** For API001: the lines that differ, `- ` committed, `+ ` now, `  ` context. */
  readonly diff: readonly string[];
}

export interface ApiCheck {
  readonly entryPoints: readonly ApiEntryPoint[];
  readonly diagnostics: readonly ApiDiagnostic[];
  /** With `update`: the report files written or removed, relative to the repository. */
  readonly updated: readonly string[];
}

export interface ApiCheckOptions {
  /** Rewrite the committed reports instead of failing on a difference. */
  readonly update?: boolean;
  /** Where the committed reports are. Default: `<root>/api`. */
  readonly reportFolder?: string;
  /**
   * Declarations already emitted (a folder laid out as dist/), for a check that edits them; by
   * default the check emits them from the sources.
   */
  readonly declarations?: string;
  /** Check only these entry points (specifiers); stale reports are looked for all the same. */
  readonly only?: readonly string[];
}

export const REPORT_SUFFIX = '.api.md';

/** The entry points of package.json's `exports` that have types, in `exports` order. */
export function apiEntryPoints(root: string): ApiEntryPoint[] {
  const manifest = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    name: string;
    exports: Record<string, string | { types?: string }>;
  };
  const entries: ApiEntryPoint[] = [];
  for (const [subpath, target] of Object.entries(manifest.exports)) {
    if (typeof target !== 'object' || target.types === undefined) continue;
    if (!target.types.startsWith('./dist/'))
      throw new Error(
        `package.json: exports["${subpath}"].types is ${target.types}; the API check reads declarations under ./dist/.`,
      );
    entries.push({
      specifier: `${manifest.name}${subpath.slice(1)}`,
      reportName: subpath.slice(2).replaceAll('/', '-'),
      declaration: target.types.slice('./dist/'.length),
    });
  }
  return entries;
}

/** Emits the declarations of tsconfig.build.json into `outDir` (laid out as dist/). */
export function emitDeclarations(root: string, outDir: string): void {
  const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
  execFileSync(
    process.execPath,
    [
      tsc,
      '-p',
      'tsconfig.build.json',
      '--emitDeclarationOnly',
      '--sourceMap',
      'false',
      '--inlineSources',
      'false',
      '--outDir',
      outDir,
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
}

/** Compares (or, with `update`, rewrites) the report of every entry point. */
export function checkApiReports(root: string, options: ApiCheckOptions = {}): ApiCheck {
  const reportFolder = options.reportFolder ?? path.join(root, 'api');
  const scratch = path.join(root, '.tmp', `api-${process.pid}-${Date.now().toString(36)}`);
  const entryPoints = apiEntryPoints(root);
  const diagnostics: ApiDiagnostic[] = [];
  const updated: string[] = [];
  const relative = (file: string) => path.relative(root, file).split(path.sep).join('/');
  try {
    const declarations = options.declarations ?? path.join(scratch, 'declarations');
    if (options.declarations === undefined) emitDeclarations(root, declarations);
    for (const entry of entryPoints) {
      if (options.only !== undefined && !options.only.includes(entry.specifier)) continue;
      const committedFile = path.join(reportFolder, `${entry.reportName}${REPORT_SUFFIX}`);
      const file = relative(committedFile);
      const extracted = extractReport(root, entry, declarations, path.join(scratch, 'reports'));
      if (typeof extracted !== 'string') {
        diagnostics.push({
          code: 'API004',
          file,
          message: `${entry.specifier}: API Extractor could not read ${entry.declaration}:\n${extracted.problems.join('\n')}`,
          diff: [],
        });
        continue;
      }
      const committed = existsSync(committedFile) ? readFileSync(committedFile, 'utf8') : undefined;
      if (committed === extracted) continue;
      if (options.update) {
        mkdirSync(reportFolder, { recursive: true });
        writeFileSync(committedFile, extracted);
        updated.push(file);
      } else if (committed === undefined) {
        diagnostics.push({
          code: 'API002',
          file,
          message: `${entry.specifier} has no API report; run \`npm run check:api -- --update\` and commit ${file}.`,
          diff: [],
        });
      } else {
        diagnostics.push({
          code: 'API001',
          file,
          message:
            `the exports of ${entry.specifier} differ from ${file}. If the change is meant, run \`npm run check:api -- --update\` and commit the report with it; ` +
            `if not, export what the report lists from ${relative(path.join(root, sourceOf(entry)))}.`,
          diff: lineDiff(committed, extracted),
        });
      }
    }
    const reported = new Set(entryPoints.map((entry) => `${entry.reportName}${REPORT_SUFFIX}`));
    const stale = existsSync(reportFolder)
      ? readdirSync(reportFolder).filter((name) => name.endsWith(REPORT_SUFFIX) && !reported.has(name))
      : [];
    for (const name of stale.sort()) {
      const file = relative(path.join(reportFolder, name));
      if (options.update) {
        rmSync(path.join(reportFolder, name));
        updated.push(file);
      } else {
        diagnostics.push({
          code: 'API003',
          file,
          message: `${file} reports no entry point of package.json's exports; delete it (\`npm run check:api -- --update\` does).`,
          diff: [],
        });
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  return { entryPoints, diagnostics, updated };
}

/** One diagnostic as printed: `file - error CODE: message`, then its diff. */
export function formatApiDiagnostic(diagnostic: ApiDiagnostic): string {
  return [
    `${diagnostic.file} - error ${diagnostic.code}: ${diagnostic.message}`,
    ...diagnostic.diff.map((line) => `    ${line}`),
  ].join('\n');
}

/** The source of an entry point's declaration: `runtime/index.d.ts` → `runtime/index.ts`. */
function sourceOf(entry: ApiEntryPoint): string {
  return entry.declaration.replace(/\.d\.ts$/, '.ts');
}

/** The report API Extractor writes for one entry point, or the problems that kept it from one. */
function extractReport(
  root: string,
  entry: ApiEntryPoint,
  declarations: string,
  reportFolder: string,
): string | { problems: string[] } {
  const entryFile = path.join(declarations, entry.declaration);
  const configObject: IConfigFile = {
    projectFolder: root,
    newlineKind: 'lf',
    mainEntryPointFilePath: entryFile,
    compiler: {
      overrideTsconfig: {
        compilerOptions: {
          target: 'es2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          strict: true,
          skipLibCheck: true,
          types: ['node'],
        },
        files: [entryFile],
      },
    },
    apiReport: {
      enabled: true,
      reportFileName: entry.reportName,
      reportFolder,
      reportTempFolder: reportFolder,
      includeForgottenExports: false,
    },
    docModel: { enabled: false },
    dtsRollup: { enabled: false },
    tsdocMetadata: { enabled: false },
    messages: {
      compilerMessageReporting: { default: { logLevel: ExtractorLogLevel.Error } },
      extractorMessageReporting: {
        default: { logLevel: ExtractorLogLevel.Warning },
        'ae-missing-release-tag': { logLevel: ExtractorLogLevel.None },
        'ae-undocumented': { logLevel: ExtractorLogLevel.None },
        // A `{@link}` to a name of another entry point (or an internal one) cannot be resolved from
        // one entry point: the links are for readers of the sources, not part of the surface.
        'ae-unresolved-link': { logLevel: ExtractorLogLevel.None },
        'ae-forgotten-export': { logLevel: ExtractorLogLevel.None, addToApiReportFile: true },
      },
      tsdocMessageReporting: { default: { logLevel: ExtractorLogLevel.None } },
    },
  };
  const config = ExtractorConfig.prepare({
    configObject,
    configObjectFullPath: undefined,
    packageJsonFullPath: path.join(root, 'package.json'),
  });
  const problems: string[] = [];
  const result = Extractor.invoke(config, {
    localBuild: true,
    messageCallback: (message: ExtractorMessage) => {
      message.handled = true;
      if (message.category === 'console') return;
      if (message.logLevel === ExtractorLogLevel.Error || message.logLevel === ExtractorLogLevel.Warning)
        problems.push(message.formatMessageWithLocation(root));
    },
  });
  const reportFile = path.join(reportFolder, `${entry.reportName}${REPORT_SUFFIX}`);
  if (!result.succeeded || problems.length > 0 || !existsSync(reportFile))
    return { problems: problems.length > 0 ? problems : ['(no report written)'] };
  // The warnings at the end name the scratch declaration's file, line and column: dropped, so that
  // the report changes with the surface, not with the comments above it or where it was emitted.
  return readFileSync(reportFile, 'utf8').replace(/^\/\/ \S+\.d\.ts:\d+:\d+ - \(/gm, '// (');
}

/**
 * The lines of `after` that differ from `before`, from their longest common subsequence, as
 * hunks with two lines of context each (`- ` before, `+ ` after, `  ` both); `…` between hunks.
 */
export function lineDiff(before: string, after: string, context = 2): string[] {
  const a = before.split('\n');
  const b = after.split('\n');
  // common[i * (b.length + 1) + j]: the longest common subsequence of a[i..] and b[j..].
  const width = b.length + 1;
  const common = new Uint32Array((a.length + 1) * width);
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i * width + j] =
        a[i] === b[j]
          ? common[(i + 1) * width + j + 1]! + 1
          : Math.max(common[(i + 1) * width + j]!, common[i * width + j + 1]!);
    }
  }
  const lines: { mark: ' ' | '-' | '+'; text: string }[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      lines.push({ mark: ' ', text: a[i++]! });
      j++;
    } else if (j < b.length && (i === a.length || common[i * width + j + 1]! >= common[(i + 1) * width + j]!))
      lines.push({ mark: '+', text: b[j++]! });
    else lines.push({ mark: '-', text: a[i++]! });
  }
  const shown = lines.map((_line, k) =>
    lines.slice(Math.max(0, k - context), k + context + 1).some((near) => near.mark !== ' '),
  );
  const out: string[] = [];
  lines.forEach((line, k) => {
    if (!shown[k]) return;
    if (k > 0 && !shown[k - 1] && out.length > 0) out.push('…');
    out.push(`${line.mark} ${line.text}`);
  });
  return out;
}
