import { createClient } from '../../client/client.js';
import { defineCommand, integerOption } from '../command.js';
import type { StepEffectRow } from '../../store/tables.js';
import { formatTable, type Column } from '../format-table.js';
import { formatTime, toJsonDocument } from '../../presentation/format-values.js';

export const effectsCommand = defineCommand({
  name: 'effects',
  summary: 'list the effect ledger (--pending: open intents only)',
  usage: '[--pending] [--run <id>] [--limit <n>] [options]',
  description:
    'Lists ledger rows, newest first. An open intent (status intent) is an external call that may have\n' +
    'happened and is not recorded yet: the reconciler resolves it once its lease and perform timeout pass.\n' +
    'With --pending, exits 1 when it lists any open intent (a finding), 0 when there is none.',
  options: {
    pending: { type: 'boolean' },
    run: { type: 'string' },
    limit: { type: 'string' },
  },
  optionsHelp: `  --pending              only open intents
  --run <id>             only this run's effects
  --limit <n>            at most n rows (default 100)`,
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, json, io, openStore }) {
    const pending = values.pending === true;
    const limit = integerOption('limit', values.limit);
    const client = createClient({ store: await openStore() });
    const effects = await client.listEffects({
      ...(pending ? { pending: true } : {}),
      ...(values.run !== undefined ? { runId: values.run } : {}),
      ...(limit !== undefined ? { limit } : {}),
    });
    // An open intent is a finding (like a parked run for reconcile); a plain listing never is.
    const exitCode = pending && effects.length > 0 ? 1 : 0;
    if (json) {
      io.out(toJsonDocument(effects));
      return exitCode;
    }
    if (effects.length === 0) {
      io.out(pending ? 'No open intents.\n' : 'No effects.\n');
      return 0;
    }
    io.out(formatTable(effects, [{ header: 'RUN', value: (e) => e.workflow_id }, ...EFFECT_COLUMNS]));
    return exitCode;
  },
});

/** A ledger row's columns, as `effects` lists them after the run id and `run` shows them for its run. */
export const EFFECT_COLUMNS: ReadonlyArray<Column<StepEffectRow>> = [
  { header: 'STEP', value: (e) => e.step_name },
  { header: 'KEY', value: (e) => e.idempotency_key },
  { header: 'KIND', value: (e) => e.kind },
  { header: 'STATUS', value: (e) => e.status },
  { header: 'ATTEMPT', value: (e) => String(e.attempt), align: 'right' },
  { header: 'INTENT', value: (e) => formatTime(e.intent_at) },
  { header: 'RECORDED', value: (e) => formatTime(e.recorded_at) },
  { header: 'RESOLUTION', value: (e) => e.resolution ?? '-' },
];
