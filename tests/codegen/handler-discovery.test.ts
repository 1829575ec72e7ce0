import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  discoverHandlerModules,
  discoverHandlerModulesSync,
  generatedModuleOf,
} from '../../codegen/discovery/discover-handler-modules.js';
import { runCodegen } from '../../codegen/run-codegen.js';
import { REPO_ROOT, TempProject } from './support/temp-project.js';

const BINDS = (specifier: string) =>
  `import { ordersHandlers } from '${specifier}';\nexport const r = ordersHandlers({} as any);\n`;

let project: TempProject;

beforeEach(() => {
  project = new TempProject('ledgerflow-handler-discovery');
});

afterEach(() => project.remove());

describe('discoverHandlerModules', () => {
  it('keeps the sources that import a generated contract or the index and mention a binder, and nothing else', async () => {
    project.write('src/orders.handlers.ts', BINDS('../generated/contracts/orders.v1.js'));
    project.write('src/via-index.ts', BINDS('../generated/index.js'));
    project.write('src/deep/via-directory.mts', BINDS('../../generated'));
    project.write(
      'src/no-binder.ts',
      `import type { OrdersHandlers } from '../generated/contracts/orders.v1.js';\nexport type H = OrdersHandlers;\n`,
    );
    project.write('src/mentions-only.ts', `// the generated ordersHandlers(...) binds handlers\nexport {};\n`);
    project.write('src/other-contracts.ts', BINDS('../contracts/orders.v1.js'));
    project.write('src/package.ts', BINDS('ledgerflow-generated/contracts/orders.v1.js'));
    project.write('src/types.d.ts', BINDS('../generated/contracts/orders.v1.js'));
    project.write('generated/contracts/orders.v1.ts', BINDS('./orders.v1.js'));
    project.write('node_modules/dep/index.ts', BINDS('../../generated/contracts/orders.v1.js'));

    expect(await discoverHandlerModules({ root: project.root, outDir: 'generated' })).toEqual([
      'src/deep/via-directory.mts',
      'src/orders.handlers.ts',
      'src/via-index.ts',
    ]);
    expect(discoverHandlerModulesSync({ root: project.root, outDir: 'generated' })).toEqual(
      await discoverHandlerModules({ root: project.root, outDir: 'generated' }),
    );
  });

  it('follows the output directory', async () => {
    project.write('src/orders.handlers.ts', BINDS('./gen/contracts/orders.v1.js'));
    project.write('src/old.handlers.ts', BINDS('../generated/contracts/orders.v1.js'));
    expect(await discoverHandlerModules({ root: project.root, outDir: 'src/gen' })).toEqual(['src/orders.handlers.ts']);
  });
});

describe('generatedModuleOf', () => {
  const generated = path.join(path.sep, 'repo', 'generated');
  const from = path.join(path.sep, 'repo', 'src', 'orders.handlers.ts');

  it('reads the workflow and version from a contract path, whether or not the file exists', () => {
    expect(generatedModuleOf(from, '../generated/contracts/order-payment.v12.js', generated)).toEqual({
      kind: 'contract',
      workflow: 'order-payment',
      version: 12,
    });
    expect(generatedModuleOf(from, '../generated/contracts/orders.v1', generated)).toEqual({
      kind: 'contract',
      workflow: 'orders',
      version: 1,
    });
  });

  it('recognises the index and rejects anything else', () => {
    expect(generatedModuleOf(from, '../generated/index.js', generated)).toEqual({ kind: 'index' });
    expect(generatedModuleOf(from, '../generated', generated)).toEqual({ kind: 'index' });
    expect(generatedModuleOf(from, '../generated/contracts/orders.js', generated)).toBeNull();
    expect(generatedModuleOf(from, '../generated/contracts/nested/orders.v1.js', generated)).toBeNull();
    expect(generatedModuleOf(from, './contracts/orders.v1.js', generated)).toBeNull();
  });
});

describe('the repository itself', () => {
  it('finds the examples’ handler modules, and their handlers give no diagnostic', async () => {
    expect(await discoverHandlerModules({ root: REPO_ROOT, outDir: 'generated' })).toEqual([
      'examples/data-backfill/handlers.ts',
      'examples/order-payment/handlers.ts',
      'examples/order-webhook/handlers.ts',
      'examples/revenue-report/handlers.ts',
      'examples/subscription-renewal/handlers.ts',
      'examples/user-onboarding/handlers.ts',
    ]);
    const run = await runCodegen({ root: REPO_ROOT });
    // Steps of the built-in kinds (copyBatches, settled, untilRenewal) have no handler to analyse.
    expect(
      run.analysis.handlers?.bindings.map(
        (b) => `${b.workflow}@${b.version}: ${b.handlers.map((h) => h.step).join(', ')}`,
      ),
    ).toEqual([
      'data-backfill@1: planBatches, total',
      'backfill-batch@1: copyBatch',
      // One handlers object bound to three versions: the analysis follows the const to its literal;
      // v3's compensations (refundCharge, voidPayment) are analysed like its steps.
      'order-payment@3: priceOrder, chargeCard, refundCharge, recordPayment, voidPayment, sendReceipt',
      'order-payment@2: priceOrder, chargeCard, recordPayment, sendReceipt',
      'order-payment@1: priceOrder, chargeCard, recordPayment, sendReceipt',
      'order-webhook@1: recordPayment, refundPayment',
      'revenue-report@1: sumPayments',
      'subscription-renewal@1: chargeRenewal',
      'user-onboarding@1: createAccount, sendWelcomeEmail',
    ]);
    expect(run.diagnostics.filter((d) => ['LF010', 'LF011', 'LF012'].includes(d.code))).toEqual([]);
  });
});
