import { readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { ts } from 'ts-morph';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCodegen } from '../../codegen/run-codegen.js';
import { tsPluginFactory } from '../../codegen/ts-plugin/language-service-plugin.js';
import { REPO_ROOT, TempProject } from './support/temp-project.js';

// The refund workflow of docs/reference/diagnostics.md with its two mistakes (LF002 at 14:27, LF001 at 19:4), plus a
// TypeScript error of its own that the plugin must leave in place.
const REFUND = `import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const refund = workflow('refund', {
  version: 1,
  input: z.object({ orderId: z.string(), amountCents: z.number().int().positive() }),
})
  .step('findCharge', {
    output: z.object({ chargeId: z.string() }),
  })
  .external('refundCharge', {
    output: z.object({ refundId: z.string() }),
    key: ({ input }) => {
      const requestedAt = Date.now();
      return \`refund:\${input.orderId}:\${requestedAt}\`;
    },
    idempotentByKey: true,
  })
  .transactional('markRefunded', {
    output: z.object({ refundId: z.string() }),
  });

export const retries: number = 'three';
`;

const CLEAN = `import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const ship = workflow('ship', { version: 1, input: z.object({ orderId: z.string() }) })
  .transactional('reserve', {
    output: z.object({ ok: z.boolean() }),
    key: ({ input }) => \`reserve:\${input.orderId}\`,
  });
`;

/** A language service over the temp project's files, with editable in-memory buffers (what an editor has). */
class EditorHost implements ts.LanguageServiceHost {
  readonly #buffers = new Map<string, { text: string; version: number }>();

  constructor(
    readonly root: string,
    files: readonly string[],
  ) {
    for (const file of files) this.#buffers.set(file, { text: readFileSync(file, 'utf8'), version: 1 });
  }

  edit(file: string, text: string): void {
    this.#buffers.set(file, { text, version: (this.#buffers.get(file)?.version ?? 0) + 1 });
  }

  getCompilationSettings(): ts.CompilerOptions {
    // No lib and no imports resolved: the test is about the plugin, not zod's types.
    return { noLib: true, noResolve: true, strict: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext };
  }
  getScriptFileNames(): string[] {
    return [...this.#buffers.keys()];
  }
  getScriptVersion(file: string): string {
    return String(this.#buffers.get(file)?.version ?? 0);
  }
  getScriptSnapshot(file: string): ts.IScriptSnapshot | undefined {
    const buffer = this.#buffers.get(file);
    return buffer === undefined ? undefined : ts.ScriptSnapshot.fromString(buffer.text);
  }
  getCurrentDirectory(): string {
    return this.root;
  }
  getDefaultLibFileName(options: ts.CompilerOptions): string {
    return ts.getDefaultLibFileName(options);
  }
  fileExists(file: string): boolean {
    return this.#buffers.has(file);
  }
  readFile(file: string): string | undefined {
    return this.#buffers.get(file)?.text;
  }
}

let project: TempProject;
let refundFile: string;
let cleanFile: string;
let otherFile: string;

beforeAll(() => {
  project = new TempProject('ledgerflow-ts-plugin');
  refundFile = project.write('src/refund.workflow.ts', REFUND);
  cleanFile = project.write('src/ship.workflow.ts', CLEAN);
  otherFile = project.write('src/util.ts', 'export const answer: string = 42;\n');
});

afterAll(() => project.remove());

function createPlugin(
  config: Record<string, unknown> = {},
  files: readonly string[] = [refundFile, cleanFile, otherFile],
) {
  const host = new EditorHost(project.root, files);
  const languageService = ts.createLanguageService(host);
  const logged: string[] = [];
  const info = {
    config: { name: 'ledgerflow/ts-plugin', ...config },
    languageService,
    languageServiceHost: host,
    project: { projectService: { logger: { info: (message: string) => logged.push(message) } } },
  } as unknown as ts.server.PluginCreateInfo;
  return { host, info, languageService, plugin: tsPluginFactory({ typescript: ts }).create(info), logged };
}

const ledgerflowOnly = (diagnostics: readonly ts.Diagnostic[]) => diagnostics.filter((d) => d.source === 'ledgerflow');
const textOf = (d: ts.Diagnostic) => d.file!.text.slice(d.start!, d.start! + d.length!);
const lineColOf = (d: ts.Diagnostic) => {
  const { line, character } = d.file!.getLineAndCharacterOfPosition(d.start!);
  return `${line + 1}:${character + 1}`;
};

describe('the TypeScript language-service plugin', () => {
  it("appends the CLI's diagnostics for a workflow file, with its messages, at its positions", async () => {
    const { plugin, languageService, logged } = createPlugin();
    const cli = (await runCodegen({ root: project.root })).diagnostics.filter(
      (d) => d.file === 'src/refund.workflow.ts',
    );
    expect(cli.map((d) => `${d.line}:${d.col} ${d.code}`)).toEqual(['14:27 LF002', '19:4 LF001']);

    const diagnostics = plugin.getSemanticDiagnostics(refundFile);
    const original = languageService.getSemanticDiagnostics(refundFile);
    expect(diagnostics.slice(0, original.length)).toEqual(original);
    expect(original.some((d) => d.code === 2322)).toBe(true);

    const found = ledgerflowOnly(diagnostics);
    expect(
      found.map((d) => ({ at: lineColOf(d), code: d.code, message: d.messageText, category: d.category })),
    ).toEqual(
      cli.map((d) => ({
        at: `${d.line}:${d.col}`,
        code: Number(d.code.slice(2)),
        message: d.message,
        category: ts.DiagnosticCategory.Error,
      })),
    );
    expect(found.map(textOf)).toEqual(['Date.now()', 'transactional']);
    expect(logged).toEqual([]);
  });

  it('reports nothing of its own for a clean workflow or a file codegen does not read', () => {
    const { plugin, languageService } = createPlugin();
    expect(plugin.getSemanticDiagnostics(cleanFile)).toEqual(languageService.getSemanticDiagnostics(cleanFile));
    const other = plugin.getSemanticDiagnostics(otherFile);
    expect(other.map((d) => d.code)).toEqual([2322]);
    expect(ledgerflowOnly(other)).toEqual([]);
  });

  it("checks the editor's unsaved text, again after each edit", () => {
    const { plugin, host } = createPlugin();
    expect(ledgerflowOnly(plugin.getSemanticDiagnostics(cleanFile))).toEqual([]);
    const unstable = CLEAN.replace('key: ({ input }) => `reserve:${input.orderId}`', 'key: () => Date.now()');
    host.edit(cleanFile, unstable);
    const found = ledgerflowOnly(plugin.getSemanticDiagnostics(cleanFile));
    expect(found.map((d) => [lineColOf(d), d.code, textOf(d)])).toEqual([
      ['7:5', 5, 'key: () => Date.now()'],
      ['7:16', 2, 'Date.now()'],
    ]);
    expect(found[1]!.messageText).toMatch(/^key of step "reserve" reads the clock \(Date\.now\(\)\)/);
    host.edit(cleanFile, CLEAN);
    expect(ledgerflowOnly(plugin.getSemanticDiagnostics(cleanFile))).toEqual([]);
  });

  it("reports warnings as warnings and honours the entry's include", () => {
    const file = project.write(
      'flows/constant.ts',
      CLEAN.replace('key: ({ input }) => `reserve:${input.orderId}`', "key: () => 'reserve'"),
    );
    try {
      const { plugin, logged } = createPlugin({ include: ['flows/*.ts'] }, [file]);
      const found = ledgerflowOnly(plugin.getSemanticDiagnostics(file));
      expect(found.map((d) => [lineColOf(d), d.code, d.category, textOf(d)])).toEqual([
        ['7:5', 5, ts.DiagnosticCategory.Warning, "key: () => 'reserve'"],
      ]);
      expect(logged).toEqual([]);
    } finally {
      rmSync(file);
    }
  });

  it("returns TypeScript's diagnostics untouched, and logs why, when the analysis fails", () => {
    const { plugin, languageService, logged } = createPlugin({ outDir: '../outside' });
    expect(plugin.getSemanticDiagnostics(refundFile)).toEqual(languageService.getSemanticDiagnostics(refundFile));
    expect(plugin.getSemanticDiagnostics(refundFile).some((d) => d.code === 2322)).toBe(true);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toMatch(
      /^\[ledgerflow\/ts-plugin\] codegen's analysis failed, so only TypeScript's diagnostics are shown: CodegenOptionsError: outDir must be a directory inside root/,
    );
  });

  it('loads as the tsconfig of docs/tutorial/03-diagnostics.md names it: resolved as tsserver resolves it (node10, no exports) and require()d', () => {
    const tsconfig = JSON.parse(
      readFileSync(path.join(REPO_ROOT, 'tests/codegen/fixtures/ts-plugin-tsconfig.json'), 'utf8'),
    ) as {
      compilerOptions: { plugins: { name: string }[] };
    };
    const entry = tsconfig.compilerOptions.plugins[0]!;
    const tsserverResolution = ts.resolveModuleName(
      entry.name,
      path.join(project.root, 'node_modules', 'index.js'),
      { moduleResolution: ts.ModuleResolutionKind.Node10, allowJs: true, noDtsResolution: true },
      ts.sys,
    );
    expect(tsserverResolution.resolvedModule?.resolvedFileName).toBe(path.join(REPO_ROOT, 'ts-plugin/index.js'));
    const factory: unknown = createRequire(path.join(project.root, 'index.js'))(entry.name);
    expect(typeof factory).toBe('function');
    const { info } = createPlugin(entry, [refundFile]);
    const plugin = (factory as ts.server.PluginModuleFactory)({ typescript: ts }).create(info);
    expect(ledgerflowOnly(plugin.getSemanticDiagnostics(refundFile)).map((d) => d.code)).toEqual([2, 1]);
  });
});
