import { runReconcilePass } from '../../reconciler/reconciler.js';
import { defineCommand, integerOption, UsageError } from '../command.js';
import { formatTable } from '../format-table.js';
import { toJsonDocument } from '../../presentation/format-values.js';
import { loadWorkflowsModule, requireRegistrations } from '../load-workflows.js';

export const reconcileCommand = defineCommand({
  name: 'reconcile',
  summary: 'resolve due open intents once (exit 1 if any run stays parked)',
  usage: '--workflows <module> [--lease-ms <n>] [--limit <n>] [options]',
  description:
    "Runs one reconciliation pass over every open intent past its horizon (intent time + the writer's lease +\n" +
    "the step's perform timeout, stored on the intent), looked up through the step's reconcile(): found →\n" +
    'recorded and the run advances; not found → released for a retry with the same key after the retry\n' +
    'backoff; unknown → the run is parked in needs_reconciliation and the intent asked again after a backoff.\n' +
    'Intents of cancelled and failed runs are settled in the ledger too (recorded or released). An intent the\n' +
    'provider cannot tell about is left for an operator: `ledgerflow resolve` settles it by hand.',
  options: {
    workflows: { type: 'string' },
    'lease-ms': { type: 'string' },
    limit: { type: 'string' },
  },
  optionsHelp: `  --workflows <module>   module exporting \`workflows\`: registrations with handlers (required)
  --lease-ms <n>         how long the pass holds a run or an intent it is settling (default 30000)
  --limit <n>            intents claimed per page, oldest horizon first (default 100)`,
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, json, io, openStore }) {
    if (values.workflows === undefined) {
      throw new UsageError("--workflows <module> is required: the reconciler calls the steps' reconcile() handlers.");
    }
    const leaseMs = integerOption('lease-ms', values['lease-ms']);
    const limit = integerOption('limit', values.limit);
    const workflows = requireRegistrations(await loadWorkflowsModule(values.workflows), values.workflows);
    const report = await runReconcilePass({
      store: await openStore(),
      workflows,
      ...(leaseMs !== undefined ? { leaseMs } : {}),
      ...(limit !== undefined ? { limit } : {}),
    });
    if (json) {
      io.out(toJsonDocument(report));
    } else {
      if (report.items.length > 0) {
        io.out(
          formatTable(report.items, [
            { header: 'RUN', value: (i) => i.runId },
            { header: 'WORKFLOW', value: (i) => i.workflow },
            { header: 'STEP', value: (i) => i.step },
            { header: 'KEY', value: (i) => i.key },
            { header: 'OUTCOME', value: (i) => i.outcome },
            { header: 'DETAIL', value: (i) => i.detail },
          ]),
        );
      }
      io.out(
        `${report.examined} due intent(s) examined: ${report.recorded} recorded, ${report.released} released, ` +
          `${report.parked} parked, ${report.deferred} deferred, ${report.skipped} skipped, ${report.errors} errors.\n`,
      );
      if (report.parked > 0 || report.deferred > 0) {
        io.out(
          'Parked and deferred intents are asked about again after their backoff. If you know the answer, settle one yourself:\n' +
            '  ledgerflow resolve <run-id> <step> --found <json> | --not-found --reason <text>\n',
        );
      }
    }
    return report.parked > 0 || report.errors > 0 ? 1 : 0;
  },
});
