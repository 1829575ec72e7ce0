/**
 * What `ledgerflow init` does about package.json. ledgerflow and every file init and codegen
 * write are ES modules, so node must load the project's `.ts`/`.js` files as ESM: the package
 * needs `"type": "module"`, and `npm init -y` writes `"commonjs"`. Init sets it itself when that
 * can change nothing else — when no file of the project but the ones init writes is one whose
 * module format "type" decides (`.js`, `.jsx`, `.ts`, `.tsx`, outside node_modules and dot
 * directories; `.mjs`/`.cjs`/`.mts`/`.cts` say their format themselves). Any such file may rely on
 * CommonJS (`require`, `module.exports`, a compiled build): then init leaves package.json as it is
 * and makes `npm pkg set type=module` the first next step, naming the files. The edit changes
 * that one value and keeps the owner's formatting.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { UsageError } from './command.js';

/** The step that sets the type when init may not: npm's own command, which keeps the file's formatting too. */
export const SET_MODULE_TYPE_STEP = 'npm pkg set type=module';

/** What a project needs installed for init's next steps (tsx: the CLI loads the `.ts` workflows module through it). */
const NEEDED_PACKAGES = ['ledgerflow', 'zod', 'tsx'] as const;
/** ledgerflow is not on the npm registry: it is installed from a tarball built from its repository. */
const LEDGERFLOW_SOURCE = '<path to the ledgerflow .tgz>';
const TYPE_DECIDES = /\.(js|jsx|ts|tsx)$/;
/** How many such files init names; it stops looking after that many. */
const NAMED_FILES = 3;

export interface PackageJsonReport {
  /** "type" as init found it; undefined when not set (CommonJS). */
  readonly typeWas: unknown;
  /** "type" is "module" now, set by init or already so. */
  readonly isModule: boolean;
  /** Whether init set it. */
  readonly edited: boolean;
  /** When init left it: the first files whose module format it decides (at most three). */
  readonly commonJsFiles: readonly string[];
  /** Whether there are more such files than those named. */
  readonly moreCommonJsFiles: boolean;
  /** `npm install …` for what package.json declares of neither dependencies nor devDependencies; undefined when all are. */
  readonly installStep: string | undefined;
}

type Manifest = Record<string, unknown> & {
  type?: unknown;
  dependencies?: Record<string, unknown>;
  devDependencies?: Record<string, unknown>;
};

/**
 * Reads `root`/package.json, sets `"type": "module"` when no file but `ownFiles` (init's, by path
 * relative to the root → the content init writes; a file that differs is the user's) could rely
 * on CommonJS, and says what is left to do.
 */
export function preparePackageJson(root: string, ownFiles: ReadonlyMap<string, string>): PackageJsonReport {
  const file = path.join(root, 'package.json');
  const text = readFileSync(file, 'utf8');
  let manifest: Manifest;
  try {
    manifest = JSON.parse(text) as Manifest;
  } catch (error) {
    throw new UsageError(`package.json is not valid JSON (${(error as Error).message}); fix it and run init again.`);
  }
  if (typeof manifest !== 'object' || manifest === null || Array.isArray(manifest)) {
    throw new UsageError('package.json is not a JSON object; fix it and run init again.');
  }
  const declared = { ...manifest.devDependencies, ...manifest.dependencies };
  const missing = NEEDED_PACKAGES.filter((name) => !(name in declared));
  const installStep =
    missing.length > 0
      ? `npm install ${missing.map((name) => (name === 'ledgerflow' ? LEDGERFLOW_SOURCE : name)).join(' ')}`
      : undefined;
  const base = { typeWas: manifest.type, installStep };
  const none = { commonJsFiles: [], moreCommonJsFiles: false };
  if (manifest.type === 'module') return { ...base, ...none, isModule: true, edited: false };

  const found = filesTypeDecides(root, ownFiles);
  if (found.length > 0) {
    return {
      ...base,
      isModule: false,
      edited: false,
      commonJsFiles: found.slice(0, NAMED_FILES),
      moreCommonJsFiles: found.length > NAMED_FILES,
    };
  }
  writeFileSync(file, withModuleType(text, manifest));
  return { ...base, ...none, isModule: true, edited: true };
}

/** The project's files (relative, forward slashes) whose module format "type" decides, init's own left out: the first few, sorted, and one more if there is one. */
function filesTypeDecides(root: string, ownFiles: ReadonlyMap<string, string>): string[] {
  const found: string[] = [];
  const visit = (dir: string): void => {
    const entries = readdirSync(path.join(root, dir), { withFileTypes: true }).sort((a, b) =>
      a.name < b.name ? -1 : 1,
    );
    for (const entry of entries) {
      if (found.length > NAMED_FILES) return;
      const relative = dir === '' ? entry.name : `${dir}/${entry.name}`;
      // Dot directories (.git, .github, .ledgerflow) hold no modules node loads; a dot file such as .eslintrc.js is one.
      if (entry.isDirectory() && entry.name !== 'node_modules' && !entry.name.startsWith('.')) visit(relative);
      else if (entry.isFile() && TYPE_DECIDES.test(entry.name) && !isOwn(relative)) found.push(relative);
    }
  };
  const isOwn = (relative: string): boolean => {
    const content = ownFiles.get(relative);
    return content !== undefined && readFileSync(path.join(root, relative), 'utf8') === content;
  };
  visit('');
  return found;
}

/**
 * `text` with `"type": "module"`: the value replaced where the key stands, or the key added last
 * in the file's indentation. An edit is kept only if it parses back to exactly the manifest with
 * the new type; when none does (an unusual layout), the file is written out again in its
 * indentation instead.
 */
function withModuleType(text: string, manifest: Manifest): string {
  const wanted = { ...manifest, type: 'module' };
  const indent = /\n([ \t]+)"/.exec(text)?.[1] ?? '  ';
  const newline = text.includes('\r\n') ? '\r\n' : '\n';
  // A nested "type" (e.g. `"repository": { "type": "git" }`) may come first: try each.
  const candidates =
    'type' in manifest
      ? [...text.matchAll(/("type"\s*:\s*)"(?:[^"\\]|\\.)*"/g)].map(
          (match) => `${text.slice(0, match.index)}${match[1]!}"module"${text.slice(match.index + match[0].length)}`,
        )
      : [text.replace(/([^\s{,])(\s*)\}(\s*)$/, `$1,${newline}${indent}"type": "module"$2}$3`)];
  const edited = candidates.find((candidate) => parsesTo(candidate, wanted));
  if (edited !== undefined) return edited;
  const trailing = /\r?\n$/.test(text) ? newline : '';
  return `${JSON.stringify(wanted, null, indent).replace(/\n/g, newline)}${trailing}`;
}

function parsesTo(text: string, value: unknown): boolean {
  try {
    return isDeepStrictEqual(JSON.parse(text), value);
  } catch {
    return false;
  }
}
