import { createClient } from '../../client/client.js';
import { compensatingReason, runStatusLabel } from '../../client/run-status-label.js';
import { defineCommand } from '../command.js';
import { toJsonDocument } from '../../presentation/format-values.js';
import { NOTE_OPTIONS, NOTE_OPTIONS_HELP, noteOption } from '../operator-note.js';

export const cancelCommand = defineCommand({
  name: 'cancel',
  summary: 'cancel a run that has not finished',
  usage: '<run-id> [--reason <text> [--actor <name>]] [options]',
  description:
    'Cancels a pending, running, waiting or parked run, and its unfinished children with it (a child that is\n' +
    'compensating finishes its compensation). A worker still executing one of its steps is fenced out and\n' +
    'cannot commit. An open ledger intent (an external call that may have happened) is settled by the\n' +
    'reconciler once its horizon passes: recorded if the provider applied it, released if not (or settle it\n' +
    'yourself: ledgerflow resolve). With --reason, the cancel is written to the audit trail. Exits 1 if the run\n' +
    'had already finished, or is compensating: a compensating run is not cancelled, it finishes undoing its\n' +
    'effects.',
  options: NOTE_OPTIONS,
  optionsHelp: NOTE_OPTIONS_HELP,
  positionals: { min: 1, max: 1, names: 'one run id' },
  async run({ values, positionals, json, io, openStore }) {
    const note = noteOption(values, false, 'a cancel');
    const client = createClient({ store: await openStore() });
    const runId = positionals[0]!;
    const cancelled = await client.cancel(runId, note);
    const run = await client.getRun(runId);
    const { status } = run;
    const compensating = compensatingReason(run) !== undefined;
    if (json)
      io.out(toJsonDocument({ runId, cancelled, status, ...(compensating ? { compensation: run.compensation } : {}) }));
    else if (cancelled && compensating) {
      // The cancel started the compensation (`compensate`, or the workflow's compensateOnCancel): not cancelled yet, nor ever.
      io.out(
        `Run ${runId} is compensating (not cancelled): its recorded effects are being undone. ` +
          'It ends compensated, or compensation_failed if an undo fails.\n',
      );
    } else if (cancelled) io.out(`Cancelled run ${runId}.\n`);
    else if (compensating) {
      io.out(
        `Run ${runId} was not cancelled: it is ${runStatusLabel(run)}. A compensating run is not cancelled: it goes on\n` +
          'undoing its recorded effects until it is compensated or compensation_failed.\n',
      );
    } else io.out(`Run ${runId} was not cancelled: it is already ${status}.\n`);
    return cancelled ? 0 : 1;
  },
});
