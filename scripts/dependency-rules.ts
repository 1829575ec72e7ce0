/**
 * The import rules of the product code (dsl/, codegen/, runtime/), checked by `npm run check:deps`
 * (scripts/check-deps.ts; in CI right after the typecheck) and by tests/house/import-rules.test.ts.
 * Why these rules: DESIGN.md, "Module layering".
 *
 * What counts as an import: every relative specifier of a static import or re-export, of a dynamic
 * `import('…')` with a literal, and of an `import('…')` type; and `ledgerflow/…` specifiers, read
 * as the package's own source entry points (`ledgerflow-source` in package.json `exports`).
 *
 * Cycles: NO import cycle at all, and type-only imports (`import type`, `export type`, an
 * `import('…')` type) count as edges like any other. Two modules that name each other's types
 * change together as much as two that call each other, and the fix is the same: move what both
 * need to one home below both. (An inline `import { type T }` is not type-only for this check
 * either: under `verbatimModuleSyntax` it still loads the module.)
 *
 * Directions: a rule forbids every import from one set of folders into another, type-only or not,
 * except its seams — imports named here one by one, each with the reason it stays. A seam that
 * matches no import any more is reported too, so that this list stays true: delete it.
 */

/** The folders whose `.ts` files are checked. Tests, benchmarks and examples may import anything. */
export const SOURCE_ROOTS: readonly string[] = ['dsl', 'codegen', 'runtime'];

/** One allowed exception to a {@link DirectionRule}: exactly this file importing exactly that one. */
export interface Seam {
  readonly from: string;
  readonly to: string;
  /** Only `import type` (or `export type`) is allowed: nothing of `to` is loaded at run time. */
  readonly typeOnly?: true;
  /** Why the import stays, for whoever wants to remove it. */
  readonly reason: string;
}

export interface DirectionRule {
  /** What the rule says and where things go instead, in the words a violation is reported with. */
  readonly says: string;
  /** Path prefixes (relative to the repository, forward slashes) of the importing files. */
  readonly from: readonly string[];
  /** Path prefixes of the files they must not import. */
  readonly to: readonly string[];
  readonly seams?: readonly Seam[];
}

export const DIRECTION_RULES: readonly DirectionRule[] = [
  {
    says: 'dsl/ (what users author workflows with) imports neither the runtime nor codegen: what they share lives in dsl/',
    from: ['dsl/'],
    to: ['runtime/', 'codegen/'],
  },
  {
    says: 'codegen/ imports dsl/, not the runtime: what both need lives in dsl/',
    from: ['codegen/'],
    to: ['runtime/'],
    seams: [
      {
        from: 'codegen/cli/main.ts',
        to: 'runtime/cli/cli-io.ts',
        reason:
          "`ledgerflow codegen` is a command of the one CLI: it writes through the CLI's I/O (streams and exit code) like every other command",
      },
    ],
  },
  {
    says: 'runtime/ imports dsl/, not codegen (except where it reads or runs what codegen writes): what both need lives in dsl/',
    from: ['runtime/'],
    to: ['codegen/'],
    seams: [
      {
        from: 'runtime/cli/contract-check.ts',
        to: 'codegen/run-codegen.ts',
        reason:
          '`ledgerflow worker` runs codegen in memory and refuses a served version whose contract is stale (loaded lazily: ts-morph is large)',
      },
      {
        from: 'runtime/cli/contract-check.ts',
        to: 'codegen/discovery/discover-workflow-files.ts',
        reason: 'the contract check reads the manifest where codegen writes it (DEFAULT_OUT_DIR)',
      },
      {
        from: 'runtime/cli/contract-check.ts',
        to: 'codegen/model/manifest.ts',
        reason: 'the contract check reads the manifest codegen writes: its file name and entries',
      },
      {
        from: 'runtime/cli/contract-check.ts',
        to: 'codegen/emit/naming.ts',
        reason:
          "the contract check compares a version's contract file with what codegen would write now, by codegen's name for it",
      },
      {
        from: 'runtime/migrate/migrate.ts',
        to: 'codegen/emit/workflow-version-sql.ts',
        reason: "`migrate` reads a draft version's migration in the format codegen writes it (releasedDefinitionHash)",
      },
      {
        from: 'runtime/testing/test-environment.ts',
        to: 'codegen/emit/workflow-version-sql.ts',
        reason:
          "the testing kit migrates a version no source registers with codegen's own emitter, a pure function of dsl data",
      },
    ],
  },
  {
    says: 'the client does not import worker internals: what both need lives below both (runtime/store/, runtime/contracts/), or the client defines it and the worker provides it (client/local-starts.ts)',
    from: ['runtime/client/'],
    to: ['runtime/worker/'],
    seams: [
      {
        from: 'runtime/client/client.ts',
        to: 'runtime/worker/worker.ts',
        typeOnly: true,
        reason:
          '`createClient({ worker })` takes the public `Worker` handle: its type only; what the client needs of that worker is client/local-starts.ts',
      },
      {
        from: 'runtime/client/operator/resolve.ts',
        to: 'runtime/worker/step-commits.ts',
        reason:
          "an operator's resolve records a found effect with the worker's own fenced step commit (`advanceRun`), as the reconciler does: one statement records an effect, and it is the worker's",
      },
    ],
  },
  {
    says: 'the dashboard does not import the CLI: what both print lives in runtime/presentation/',
    from: ['runtime/dashboard/'],
    to: ['runtime/cli/'],
  },
  {
    says: 'product code does not import tests, benchmarks, examples, generated code or scripts: what it needs lives in dsl/, codegen/ or runtime/',
    from: ['dsl/', 'codegen/', 'runtime/'],
    to: ['tests/', 'bench/', 'examples/', 'generated/', 'scripts/'],
  },
];
