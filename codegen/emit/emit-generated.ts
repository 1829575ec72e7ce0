import type { Suppression } from '../model/suppression.js';
import type { WorkflowModel } from '../model/workflow-model.js';
import { emitContractModule } from './contract-module.js';
import { emitEventsModule } from './events-module.js';
import { EVENTS_FILE, INDEX_FILE, REVIEW_FILE, type GeneratedFile } from './generated-file.js';
import { emitIndexModule } from './index-module.js';
import { emitManifest } from './manifest-json.js';
import { MANIFEST_FILE_NAME } from '../model/manifest.js';
import { waitedEvents } from '../model/waited-events.js';
import { planMigrations, type DraftVersions } from './migrations.js';
import { contractFileName } from './naming.js';
import { emitReview } from './review-markdown.js';

export interface EmitInput {
  readonly workflows: readonly WorkflowModel[];
  /** Output directory relative to the root, forward slashes, no trailing slash. */
  readonly outDir: string;
  /** Names of the files already in `<outDir>/migrations` (they are kept, never rewritten). */
  readonly existingMigrations: readonly string[];
  /** The `// ledgerflow-ignore` comments in effect, which REVIEW.md lists. Default: none. */
  readonly suppressions?: readonly Suppression[];
  /** Draft versions (manifest `draft`, draft migrations, REVIEW.md). Default: none, every version released. */
  readonly versions?: DraftVersions;
}

/**
 * The emission stage: every generated file, from plain data, sorted by path. Deterministic:
 * the same model and migration directory always give the same bytes. The typed event senders
 * (`contracts/events.ts`) are emitted only when some workflow waits for an event.
 *
 * @example
 * const files = emitGenerated({ workflows: analysis.workflows, outDir: 'generated', existingMigrations: [] });
 * files.map((f) => f.path); // ['REVIEW.md', 'contracts/refund.v1.ts', 'index.ts', 'ledgerflow.manifest.json', 'migrations/0002_refund_v1.sql']
 */
export function emitGenerated({
  workflows,
  outDir,
  existingMigrations,
  suppressions = [],
  versions,
}: EmitInput): GeneratedFile[] {
  const migrations = planMigrations(workflows, existingMigrations, versions);
  const drafts = versions?.drafts ?? new Set<string>();
  const events = waitedEvents(workflows);
  const files: GeneratedFile[] = [
    ...workflows.map((workflow) => {
      const path = contractFileName(workflow);
      return { path, content: emitContractModule(workflow, `${outDir}/${path}`) };
    }),
    ...(events.length === 0
      ? []
      : [{ path: EVENTS_FILE, content: emitEventsModule(events, `${outDir}/${EVENTS_FILE}`) }]),
    { path: INDEX_FILE, content: emitIndexModule(workflows, outDir, events.length > 0) },
    { path: MANIFEST_FILE_NAME, content: emitManifest(workflows, migrations.byWorkflow, drafts) },
    { path: REVIEW_FILE, content: emitReview(workflows, suppressions, drafts) },
    ...migrations.files,
  ];
  return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
