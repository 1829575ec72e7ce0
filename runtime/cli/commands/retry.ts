import { createClient } from '../../client/client.js';
import { defineCommand } from '../command.js';
import { toJsonDocument } from '../../presentation/format-values.js';
import { NOTE_OPTIONS, NOTE_OPTIONS_HELP, noteOption } from '../operator-note.js';

export const retryCommand = defineCommand({
  name: 'retry',
  summary: 'retry a failed, cancelled or compensation_failed run from the step it stopped at (audited)',
  usage: '<run-id> --reason <text> [--actor <name>] [options]',
  description:
    'Makes a failed or cancelled run pending again, due now, at the step it stopped at, with a fresh attempt\n' +
    'budget for that step. Recorded effects and checkpointed results are reused, never performed again; an\n' +
    'open intent is taken over or reconciled by the next attempt as usual. A deadline that has passed is\n' +
    'dropped. Refused (exit 1, nothing written) for a run in another status, for a child whose parent is not\n' +
    'over yet, and for a run with failed or cancelled children (retry those first). Written to the audit trail.\n' +
    'A compensation_failed run resumes at the compensation that failed, then runs the ones after it.',
  options: NOTE_OPTIONS,
  optionsHelp: NOTE_OPTIONS_HELP,
  positionals: { min: 1, max: 1, names: 'one run id' },
  async run({ values, positionals, json, io, openStore }) {
    const note = noteOption(values, true, 'a retry')!;
    const retried = await createClient({ store: await openStore() }).retryRun(positionals[0]!, note);
    if (json) io.out(toJsonDocument(retried));
    else
      io.out(
        `Retried run ${retried.runId} (was ${retried.previousStatus}) from step "${retried.fromStep}": pending, due now.\n`,
      );
    return 0;
  },
});
