import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_OUT_DIR } from '../../codegen/discovery/discover-workflow-files.js';
import { MANIFEST_FILE_NAME, type ManifestWorkflow } from '../../codegen/model/manifest.js';
import { contractFileName } from '../../codegen/emit/naming.js';

/** A workflow version a worker serves. */
export interface ServedVersion {
  readonly name: string;
  readonly version: number;
}

/**
 * How the `ledgerflow worker` command compares what it serves with the generated contract. The
 * contract pins schemas, keys and the other parts by their source text (codegen's pins), which the
 * runtime cannot recompute from loaded objects — so the command runs codegen itself, in memory, on
 * the project in the current directory, and reports, for the versions it serves only: LF007 (a
 * released version changed without a bump) and a contract or manifest entry that is not what
 * codegen would write now (`ledgerflow codegen` was not run after a change). Nothing is written.
 *
 * Skipped (null) when the current directory has no `generated/ledgerflow.manifest.json` or the
 * manifest lists none of the served versions: the worker serves definitions codegen does not
 * manage here. It costs a codegen run at start (DESIGN.md "Registered definitions").
 */
export async function contractDrift(root: string, served: readonly ServedVersion[]): Promise<string[] | null> {
  const manifestPath = path.join(root, DEFAULT_OUT_DIR, MANIFEST_FILE_NAME);
  if (!existsSync(manifestPath)) return null;
  const committed = entriesOf(readFileSync(manifestPath, 'utf8'));
  const mine = served.filter((s) => committed.has(`${s.name}@${s.version}`));
  if (mine.length === 0) return null;
  // Loaded only here: codegen (ts-morph) is a large import a worker otherwise never needs.
  const { runCodegen } = await import('../../codegen/run-codegen.js');
  const run = await runCodegen({ root });
  const problems: string[] = [];
  for (const { name, version } of mine) {
    const where = `workflow "${name}" v${version}`;
    const drift = run.diagnostics.filter((d) => d.code === 'LF007' && d.message.startsWith(`${where} changed`));
    for (const d of drift) problems.push(`  ${d.file}:${d.line}:${d.col} - error ${d.code}: ${d.message}`);
    if (drift.length > 0 || run.generated === null) continue;
    const contract = run.generated.find((f) => f.path === contractFileName({ name, version }));
    const onDisk = path.join(root, run.outDir, contractFileName({ name, version }));
    const manifest = run.generated.find((f) => f.path === MANIFEST_FILE_NAME);
    const entryNow = manifest === undefined ? undefined : entriesOf(manifest.content).get(`${name}@${version}`);
    const stale =
      (contract !== undefined && (!existsSync(onDisk) || readFileSync(onDisk, 'utf8') !== contract.content)) ||
      JSON.stringify(entryNow) !== JSON.stringify(committed.get(`${name}@${version}`));
    if (stale) {
      problems.push(
        `  ${where}: its declaration changed since \`ledgerflow codegen\` generated its contract (${run.outDir}/${contractFileName({ name, version })}); ` +
          'run `ledgerflow codegen` (it reports LF007 if the version is released and must be bumped), then `ledgerflow migrate`.',
      );
    }
  }
  if (run.generated === null && problems.length === 0) {
    const errors = run.diagnostics.filter((d) => d.severity === 'error').length;
    problems.push(
      `  codegen reports ${errors} error(s), so it cannot tell whether the contracts are current: fix them (\`ledgerflow codegen --check\` ` +
        'lists them), or start with --skip-contract-check.',
    );
  }
  return problems;
}

function entriesOf(text: string): Map<string, ManifestWorkflow> {
  try {
    const workflows = (JSON.parse(text) as { workflows?: ManifestWorkflow[] }).workflows ?? [];
    return new Map(workflows.map((w) => [`${w.name}@${w.version}`, w]));
  } catch {
    return new Map();
  }
}
