import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CodegenOptionsError, describeOptionsError, runCodegen } from '../../codegen/run-codegen.js';
import { OPTION_FLAGS } from '../../codegen/cli/parse-args.js';
import { REPO_ROOT } from './support/temp-project.js';

/** runCodegen is a library call: its errors name its options, not the CLI's flags. */
describe('runCodegen options', () => {
  it('rejects a root that is not a directory, naming the option `root`', async () => {
    const missing = path.join(REPO_ROOT, 'no-such-directory');
    const error = await runCodegen({ root: missing }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CodegenOptionsError);
    expect(error).toBeInstanceOf(RangeError);
    expect(error).toMatchObject({ option: 'root', root: missing, value: missing });
    expect((error as Error).message).toBe(`root must be an existing directory; "${missing}" is not one.`);
    expect(describeOptionsError(error as CodegenOptionsError, OPTION_FLAGS)).toBe(
      `--root must be an existing directory; "${missing}" is not one.`,
    );
  });

  it('rejects an outDir outside the root, naming the options `outDir` and `root`', async () => {
    const error = await runCodegen({ root: REPO_ROOT, outDir: '..' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CodegenOptionsError);
    expect(error).toMatchObject({ option: 'outDir', root: REPO_ROOT, value: '..' });
    expect((error as Error).message).toBe(`outDir must be a directory inside root (${REPO_ROOT}); got "..".`);
    expect(describeOptionsError(error as CodegenOptionsError, OPTION_FLAGS)).toBe(
      `--out must be a directory inside --root (${REPO_ROOT}); got "..".`,
    );
  });
});
