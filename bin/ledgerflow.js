#!/usr/bin/env node
// Entry point for `npx ledgerflow`. Installed from npm, it runs the compiled CLI in dist/ on plain
// node. In the repository (the TypeScript sources are next to it) it runs the sources through tsx,
// with the `ledgerflow-source` export condition added to every resolution, so that a user module
// the CLI imports (--workflows) gets `ledgerflow/*` from the same sources, not from dist/.
import { existsSync } from 'node:fs';
import { register } from 'node:module';

const fromSources = existsSync(new URL('../runtime/cli/main.ts', import.meta.url));
if (fromSources) {
  const tsx = await import('tsx/esm/api');
  tsx.register();
  const addCondition = `export function resolve(specifier, context, next) {
    return next(specifier, { ...context, conditions: [...context.conditions, 'ledgerflow-source'] });
  }`;
  register(`data:text/javascript,${encodeURIComponent(addCondition)}`);
}
const lib = (path) => new URL(fromSources ? `../${path}.ts` : `../dist/${path}.js`, import.meta.url).href;

try {
  await import(lib('dsl/check-peer-dependencies'));
} catch (error) {
  if (error?.name !== 'PeerDependencyError') throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}
// Started by `ledgerflow dev` (over an IPC channel): stop as on SIGTERM once it is gone, even SIGKILLed.
if (process.channel) {
  process.channel.unref();
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
}
const command = process.argv[2];
const { main } = await import(lib(command === 'codegen' ? 'codegen/cli/main' : 'runtime/cli/main'));
process.exitCode = await main(process.argv.slice(command === 'codegen' ? 3 : 2));
