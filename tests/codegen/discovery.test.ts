import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  discoverScheduleModules,
  discoverScheduleModulesSync,
} from '../../codegen/discovery/discover-schedule-modules.js';
import { discoverWorkflowFiles, discoverWorkflowFilesSync } from '../../codegen/discovery/discover-workflow-files.js';
import { TempProject } from './support/temp-project.js';

let project: TempProject;

beforeEach(() => {
  project = new TempProject('ledgerflow-discovery');
  for (const file of [
    'a.workflow.ts',
    'src/deep/b.workflow.ts',
    'src/not-a-workflow.ts',
    'node_modules/dep/c.workflow.ts',
    'generated/d.workflow.ts',
    'out/e.workflow.ts',
    '.ledgerflow/f.workflow.ts',
    'tests/codegen/cases/lf001/input/g.workflow.ts',
  ]) {
    project.write(file, 'export {};\n');
  }
});

afterEach(() => project.remove());

describe('discoverWorkflowFiles', () => {
  it('finds *.workflow.ts under the root, sorted, skipping dependencies, the output dir and .ledgerflow', async () => {
    const files = await discoverWorkflowFiles({ root: project.root, include: ['**/*.workflow.ts'], outDir: 'out' });
    expect(files).toEqual([
      'a.workflow.ts',
      'generated/d.workflow.ts',
      'src/deep/b.workflow.ts',
      'tests/codegen/cases/lf001/input/g.workflow.ts',
    ]);
    const defaults = await discoverWorkflowFiles({
      root: project.root,
      include: ['**/*.workflow.ts'],
      outDir: 'generated',
    });
    expect(defaults).not.toContain('generated/d.workflow.ts');
    expect(defaults).toContain('out/e.workflow.ts');
    expect(discoverWorkflowFilesSync({ root: project.root, include: ['**/*.workflow.ts'], outDir: 'out' })).toEqual(
      files,
    );
  });

  it('skips the golden-case inputs only inside the ledgerflow repository itself', async () => {
    project.write('package.json', JSON.stringify({ name: 'ledgerflow' }));
    const files = await discoverWorkflowFiles({
      root: project.root,
      include: ['**/*.workflow.ts'],
      outDir: 'generated',
    });
    expect(files).toEqual(['a.workflow.ts', 'out/e.workflow.ts', 'src/deep/b.workflow.ts']);
  });

  it('takes a configurable glob', async () => {
    const files = await discoverWorkflowFiles({ root: project.root, include: ['src/**/*.ts'], outDir: 'generated' });
    expect(files).toEqual(['src/deep/b.workflow.ts', 'src/not-a-workflow.ts']);
  });
});

describe('discoverScheduleModules', () => {
  it('finds the modules that call schedule( and import a workflow file by a relative specifier, but not the workflow files themselves', async () => {
    const declares = (imports: string): string =>
      `import { schedule } from 'ledgerflow/dsl';\n${imports}\nexport const s = schedule('s', {} as never);\n`;
    project.write('src/schedules.ts', declares("import { b } from './deep/b.workflow.js';"));
    project.write('src/nightly.ts', declares("import { a } from '../a.workflow';"));
    project.write('src/other.ts', declares("import { b } from './workflows.js';")); // through a barrel: not followed
    project.write('src/no-call.ts', "import { b } from './deep/b.workflow.js';\nexport const c = b;\n");
    project.write('src/typed.ts', declares("import type { b } from './deep/b.workflow.js';"));
    project.write('generated/g.ts', declares("import { b } from '../src/deep/b.workflow.js';"));
    project.write('a.workflow.ts', declares(''));
    const files = await discoverScheduleModules({
      root: project.root,
      outDir: 'generated',
      workflowFiles: ['a.workflow.ts', 'src/deep/b.workflow.ts'],
    });
    expect(files).toEqual(['src/nightly.ts', 'src/schedules.ts']);
    expect(
      discoverScheduleModulesSync({
        root: project.root,
        outDir: 'generated',
        workflowFiles: ['a.workflow.ts', 'src/deep/b.workflow.ts'],
      }),
    ).toEqual(files);
  });
});
