import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The package's `bin/ledgerflow.js`, found upwards from this module: beside `runtime/` in the
 * repository, above `dist/` when installed. The dev server starts its worker and codegen with it.
 */
export function ledgerflowBin(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    const bin = join(dir, 'bin', 'ledgerflow.js');
    if (existsSync(bin)) return bin;
  }
  throw new Error('ledgerflow dev: cannot find bin/ledgerflow.js above the installed package.');
}
