import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * The libraries whose types an application shares with ledgerflow are peer dependencies: the
 * application's own copy is the one ledgerflow uses, so a schema the application builds is a
 * schema ledgerflow understands. A copy outside the supported range fails at start-up with this
 * check's message instead of with type errors or odd behaviour later.
 */
export interface PeerRange {
  readonly name: string;
  /** The lowest supported version, inclusive. */
  readonly atLeast: string;
  /** The first major version that is not supported. */
  readonly belowMajor: number;
}

/** zod 4.0.0 has every API ledgerflow and its generated contracts use; zod 5 is unknown. */
export const ZOD_PEER_RANGE: PeerRange = { name: 'zod', atLeast: '4.0.0', belowMajor: 5 };

export class PeerDependencyError extends Error {
  override readonly name = 'PeerDependencyError';
}

/** `4.1.12` → [4, 1, 12]; a pre-release (`4.1.0-beta.2`) counts as its release. */
function parseVersion(version: string): readonly [number, number, number] | undefined {
  const match = /^(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(version.trim());
  return match === null ? undefined : [Number(match[1]), Number(match[2]), Number(match[3])];
}

/** The range as npm writes it, e.g. `>=4.0.0 <5`. */
export function describeRange(range: PeerRange): string {
  return `>=${range.atLeast} <${range.belowMajor}`;
}

/**
 * Whether `found` is in `range`; `undefined` when it is, else the message to show.
 *
 * @example
 * peerVersionProblem(ZOD_PEER_RANGE, '3.23.8')
 * // "ledgerflow needs zod >=4.0.0 <5 (peer dependency); found 3.23.8. Run: npm install zod@^4"
 */
export function peerVersionProblem(range: PeerRange, found: string): string | undefined {
  const version = parseVersion(found);
  const floor = parseVersion(range.atLeast);
  if (floor === undefined)
    throw new TypeError(`${range.name}'s peer range starts at "${range.atLeast}", not a version.`);
  if (version !== undefined && version[0] < range.belowMajor && compareVersions(version, floor) >= 0) return undefined;
  return (
    `ledgerflow needs ${range.name} ${describeRange(range)} (peer dependency); found ${found}. ` +
    `Run: npm install ${range.name}@^${range.belowMajor - 1}`
  );
}

function compareVersions(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}

/** The version of the copy of `name` that ledgerflow's own `import` resolves to, from its package.json. */
export function installedVersion(name: string): string {
  let dir = dirname(createRequire(import.meta.url).resolve(name));
  for (;;) {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
        name?: unknown;
        version?: unknown;
      };
      if (manifest.name === name && typeof manifest.version === 'string') return manifest.version;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    const parent = dirname(dir);
    if (parent === dir)
      throw new PeerDependencyError(
        `ledgerflow cannot find the package.json of ${name}; reinstall it (npm install ${name}).`,
      );
    dir = parent;
  }
}

/** Throws a `PeerDependencyError` naming the found version and the fix when zod is out of range. */
export function assertPeerDependencies(): void {
  const problem = peerVersionProblem(ZOD_PEER_RANGE, installedVersion(ZOD_PEER_RANGE.name));
  if (problem !== undefined) throw new PeerDependencyError(problem);
}
