import { createClient } from '../../client/client.js';
import { defineCommand } from '../command.js';
import { toJsonDocument } from '../format-values.js';
import { NOTE_OPTIONS, NOTE_OPTIONS_HELP, noteOption } from '../operator-note.js';

export const cancelCommand = defineCommand({
  name: 'cancel',
  summary: 'cancel a run that has not finished',
  usage: '<run-id> [--reason <text> [--actor <name>]] [options]',
  description:
    'Cancels a pending, running, waiting or parked run, and its unfinished children with it. A worker still\n' +
    'executing one of its steps is fenced out and cannot commit. An open ledger intent (an external call that\n' +
    'may have happened) is settled by the reconciler once its horizon passes: recorded if the provider applied\n' +
    'it, released if not (or settle it yourself: ledgerflow resolve). With --reason, the cancel is written to\n' +
    'the audit trail. Exits 1 if the run had already finished.',
  options: NOTE_OPTIONS,
  optionsHelp: NOTE_OPTIONS_HELP,
  positionals: { min: 1, max: 1, names: 'one run id' },
  async run({ values, positionals, json, io, openStore }) {
    const note = noteOption(values, false, 'a cancel');
    const client = createClient({ store: await openStore() });
    const runId = positionals[0]!;
    const cancelled = await client.cancel(runId, note);
    const { status } = await client.getRun(runId);
    if (json) io.out(toJsonDocument({ runId, cancelled, status }));
    else io.out(cancelled ? `Cancelled run ${runId}.\n` : `Run ${runId} was not cancelled: it is already ${status}.\n`);
    return cancelled ? 0 : 1;
  },
});
