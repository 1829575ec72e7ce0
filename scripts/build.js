#!/usr/bin/env node
// `npm run build`: compiles dsl/, codegen/ and runtime/ into dist/ (ESM JavaScript, declarations,
// source maps with the sources inlined) and copies the files the compiled code reads at run time
// (the core migrations' SQL). The repository itself runs from the sources; dist/ is what npm ships.
import { execFileSync } from 'node:child_process';
import { cpSync, readdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = new URL('../dist/', import.meta.url);

rmSync(dist, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [fileURLToPath(new URL('../node_modules/typescript/bin/tsc', import.meta.url)), '-p', 'tsconfig.build.json'],
  {
    cwd: root,
    stdio: 'inherit',
  },
);
const migrations = new URL('../runtime/migrate/core/', import.meta.url);
for (const file of readdirSync(migrations).filter((name) => name.endsWith('.sql'))) {
  cpSync(new URL(file, migrations), new URL(`runtime/migrate/core/${file}`, dist));
}
