import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  describeRange,
  installedVersion,
  peerVersionProblem,
  ZOD_PEER_RANGE,
  type PeerRange,
} from '../../dsl/peer-dependencies.js';

const RANGE: PeerRange = { name: 'zod', atLeast: '4.1.0', belowMajor: 5 };

describe('peer dependency check', () => {
  it('accepts versions from the floor up to the next major, pre-releases as their release', () => {
    for (const version of ['4.1.0', '4.1.12', '4.6.7', '4.10.0', '4.99.99', '4.2.0-beta.1']) {
      expect(peerVersionProblem(RANGE, version), version).toBeUndefined();
    }
  });

  it('refuses older, newer and unreadable versions with the found version and the fix', () => {
    expect(peerVersionProblem(RANGE, '3.23.8')).toBe(
      'ledgerflow needs zod >=4.1.0 <5 (peer dependency); found 3.23.8. Run: npm install zod@^4',
    );
    for (const version of ['4.0.17', '5.0.0', '0.4.1', 'latest', '4.1']) {
      expect(peerVersionProblem(RANGE, version), version).toContain(`found ${version}. Run: npm install zod@^4`);
    }
  });

  it('states the range as package.json does', () => {
    expect(describeRange(ZOD_PEER_RANGE)).toBe('>=4.0.0 <5');
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      peerDependencies: Record<string, string>;
    };
    expect(manifest.peerDependencies['zod']).toBe(describeRange(ZOD_PEER_RANGE));
  });

  it('reads the version of the zod ledgerflow imports, which is in range here', () => {
    const zod = JSON.parse(readFileSync(new URL('../../node_modules/zod/package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    expect(installedVersion('zod')).toBe(zod.version);
    expect(peerVersionProblem(ZOD_PEER_RANGE, installedVersion('zod'))).toBeUndefined();
  });

  it('runs first when an entry point loads', () => {
    for (const [entry, check] of [
      ['dsl/index.ts', "import './check-peer-dependencies.js';"],
      ['runtime/index.ts', "import '../dsl/check-peer-dependencies.js';"],
      ['runtime/testing.ts', "import '../dsl/check-peer-dependencies.js';"],
    ] as const) {
      const firstImport = readFileSync(new URL(`../../${entry}`, import.meta.url), 'utf8')
        .split('\n')
        .find((line) => line.startsWith('import') || line.startsWith('export'));
      expect(firstImport, entry).toBe(check);
    }
  });
});
