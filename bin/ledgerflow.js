#!/usr/bin/env node
// Entry point for `npx ledgerflow`: runs the TypeScript CLI through tsx's loader.
import { register } from 'tsx/esm/api';

register();
const command = process.argv[2];
const entry = command === 'codegen' ? '../codegen/cli/main.ts' : '../runtime/cli/main.ts';
const { main } = await import(new URL(entry, import.meta.url).href);
process.exitCode = await main(process.argv.slice(command === 'codegen' ? 3 : 2));
