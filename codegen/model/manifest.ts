import type { StepKind } from '../../dsl/step-kind.js';

/**
 * `ledgerflow.manifest.json`: every workflow version codegen generated and what runs of it depend
 * on. Committed, so that LF007 can tell a changed workflow from a new one, LF009 a version that is
 * no longer declared from one that never was, and reviewers can diff keys. A version leaves it
 * only when it is retired (`ledgerflow codegen --retire name@version`).
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
  /**
   * A draft version (`true`): codegen may change it freely (no LF007) and rewrites its migration;
   * `ledgerflow codegen --release name@version` removes the flag, after which it is pinned. A
   * version new to the manifest starts as a draft; an entry without the flag is released (so every
   * entry written before drafts existed stays as strict as it was).
   */
  readonly draft?: true;
  /** The queue each run holds a slot of; absent when it holds none (and in entries written before queues existed). */
  readonly queue?: string;
  /** `compensateOnCancel: true`; absent when false (and in entries written before compensations existed). */
  readonly compensateOnCancel?: true;
  readonly steps: readonly ManifestStep[];
  /**
   * The part kinds this entry pins (codegen/model/pinned-parts.ts `pinnedPartKinds`: the queue
   * parts only for a version that uses a queue). Absent in a manifest written before parts were
   * pinned: such an entry pins its shape only, and the next codegen pins its parts as they are
   * then declared. A kind listed here with no hash for some step means that step had no such part.
   */
  readonly partKinds?: readonly string[];
  /** Hash per pinned part: `input`, `queue`, `steps.<step>.output`, `steps.<step>.key`, `steps.<step>.when`, ... (partId). */
  readonly parts?: Readonly<Record<string, string>>;
}

export interface ManifestStep {
  readonly name: string;
  readonly kind: StepKind;
  readonly position: number;
  readonly idempotentByKey: boolean;
  readonly key: string | null;
  /** The step has a condition (`when`); absent when it has none, and in entries written before conditions existed. */
  readonly conditional?: true;
  /** `waitFor`: the event's name. */
  readonly event?: string;
  /** `child` and `forEach`: the child workflow version, `name@version`. */
  readonly child?: string;
  /** The queue each attempt holds a slot of; absent when it holds none. */
  readonly queue?: string;
  /** `transactional` and `external`: what undoes the step (`compensate`); absent when nothing does. */
  readonly compensation?: ManifestCompensation;
}

/** A step's compensation: its name (its parts are pinned as `steps.<name>.<kind>`), whether its provider dedupes, its key. */
export interface ManifestCompensation {
  readonly name: string;
  readonly idempotentByKey: boolean;
  readonly key: string | null;
}

export const MANIFEST_FILE_NAME = 'ledgerflow.manifest.json';

/** The committed manifest as the validator sees it. */
export type CommittedManifest =
  | { readonly status: 'absent' }
  | { readonly status: 'invalid'; readonly file: string; readonly error: string }
  | {
      readonly status: 'present';
      readonly file: string;
      readonly manifest: ManifestFile;
      /** 1-based line of each entry of `workflows` in the file (1 when it cannot be told), where LF009 points. */
      readonly entryLines: readonly number[];
    };

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
    if (e.draft !== undefined && e.draft !== true) {
      return {
        status: 'invalid',
        file,
        error: `workflows[${index}] has "draft": ${JSON.stringify(e.draft)}; a draft has "draft": true, a released version no "draft"`,
      };
    }
    const kinds = e.partKinds;
    const parts = e.parts;
    if (
      (kinds !== undefined && !(Array.isArray(kinds) && kinds.every((k) => typeof k === 'string'))) ||
      (parts !== undefined &&
        (parts === null ||
          typeof parts !== 'object' ||
          Array.isArray(parts) ||
          !Object.values(parts).every((h) => typeof h === 'string')))
    ) {
      return { status: 'invalid', file, error: `workflows[${index}] has partKinds or parts of the wrong shape` };
    }
  }
  return { status: 'present', file, manifest: data as ManifestFile, entryLines: entryLines(text, workflows.length) };
}

/** The line on which each element of the top-level `workflows` array opens. */
function entryLines(text: string, count: number): number[] {
  const lines: number[] = [];
  let depth = 0;
  let line = 1;
  let key: string | null = null;
  let inWorkflows = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '\n') {
      line++;
    } else if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      if (depth === 1) key = text.slice(i + 1, j);
      i = j;
    } else if (c === '{' || c === '[') {
      if (depth === 2 && inWorkflows && c === '{') lines.push(line);
      if (depth === 1 && c === '[' && key === 'workflows') inWorkflows = true;
      depth++;
    } else if (c === '}' || c === ']') {
      depth--;
      if (depth === 1) inWorkflows = false;
    }
  }
  return lines.length === count ? lines : Array.from({ length: count }, () => 1);
}
