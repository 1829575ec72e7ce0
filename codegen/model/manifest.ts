import type { StepKind } from '../../dsl/step-kind.js';

/**
 * `ledgerflow.manifest.json`: what codegen generated, per workflow version. Committed, so that
 * LF007 can tell a changed workflow from a new one, and reviewers can diff keys.
 */
export interface ManifestFile {
  readonly '//': string;
  readonly workflows: readonly ManifestWorkflow[];
}

export interface ManifestWorkflow {
  readonly name: string;
  readonly version: number;
  readonly definitionHash: string;
  readonly exportName: string;
  readonly source: string;
  readonly migration: string;
  readonly steps: readonly ManifestStep[];
}

export interface ManifestStep {
  readonly name: string;
  readonly kind: StepKind;
  readonly position: number;
  readonly idempotentByKey: boolean;
  readonly key: string | null;
}

export const MANIFEST_FILE_NAME = 'ledgerflow.manifest.json';

/** The committed manifest as the validator sees it. */
export type CommittedManifest =
  | { readonly status: 'absent' }
  | { readonly status: 'invalid'; readonly file: string; readonly error: string }
  | { readonly status: 'present'; readonly file: string; readonly manifest: ManifestFile };

/** Parses a manifest leniently enough to survive older files, strictly enough to trust its hashes. */
export function parseManifest(file: string, text: string): CommittedManifest {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    return { status: 'invalid', file, error: `not valid JSON (${(error as Error).message})` };
  }
  const workflows = (data as { workflows?: unknown } | null)?.workflows;
  if (!Array.isArray(workflows)) return { status: 'invalid', file, error: 'it has no "workflows" array' };
  for (const [index, entry] of workflows.entries()) {
    const e = entry as Partial<Record<keyof ManifestWorkflow, unknown>> | null;
    if (
      typeof e?.name !== 'string' ||
      typeof e.version !== 'number' ||
      typeof e.definitionHash !== 'string' ||
      !Array.isArray(e.steps)
    ) {
      return { status: 'invalid', file, error: `workflows[${index}] lacks name, version, definitionHash or steps` };
    }
  }
  return { status: 'present', file, manifest: data as ManifestFile };
}
