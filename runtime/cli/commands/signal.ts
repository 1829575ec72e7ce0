import { createClient } from '../../client/client.js';
import { defineCommand, UsageError } from '../command.js';
import { toJsonDocument } from '../../presentation/format-values.js';
import { parseJsonOption } from '../json-option.js';
import { DEFAULT_WORKFLOWS_MODULE, loadWorkflowsOption } from '../load-workflows.js';

export const signalCommand = defineCommand({
  name: 'signal',
  summary: 'send an event to one run (validated, idempotent with --dedupe-key)',
  usage: '<run-id> <event> --payload <json> [--dedupe-key <key>] [--workflows <module>] [options]',
  description:
    'Sends an event to one run: its waitFor steps that wait for this event without a match take it. The\n' +
    "payload is validated with the event's schema and the run must exist and be unfinished (nothing is written\n" +
    'otherwise). A signal the run does not wait for yet is kept until one of its steps takes it. Sending again\n' +
    'with the same --dedupe-key and payload stores nothing new.',
  options: {
    payload: { type: 'string' },
    'dedupe-key': { type: 'string' },
    workflows: { type: 'string' },
  },
  optionsHelp: `  --payload <json>       the event's payload as JSON, or @file.json
  --dedupe-key <key>     your id for the signal (e.g. the approval's id)
  --workflows <module>   module exporting \`workflows\` that wait for the event (default:
                         ${DEFAULT_WORKFLOWS_MODULE})`,
  positionals: { min: 2, max: 2, names: 'a run id and an event name' },
  async run({ values, positionals, json, io, openStore }) {
    const [runId, eventName] = positionals as [string, string];
    if (values.payload === undefined)
      throw new UsageError("--payload <json> is required (use --payload '{}' for an event without a payload).");
    const payload = parseJsonOption('payload', values.payload);
    const client = createClient({ store: await openStore(), workflows: await loadWorkflowsOption(values.workflows) });
    const dedupeKey = values['dedupe-key'];
    const sent = await client.signal(runId, eventName, payload, dedupeKey !== undefined ? { dedupeKey } : {});
    if (json) {
      io.out(
        toJsonDocument({ eventId: sent.eventId, created: sent.created, woke: sent.woke, event: eventName, runId }),
      );
    } else if (!sent.created) {
      io.out(`Signal ${sent.eventId} was already sent with dedupe key "${dedupeKey}"; nothing new was stored.\n`);
    } else if (sent.woke > 0) {
      io.out(`Signalled run ${runId} with ${eventName} (${sent.eventId}); it was waiting for it and is woken.\n`);
    } else {
      io.out(
        `Signalled run ${runId} with ${eventName} (${sent.eventId}). The run does not wait for it yet: ` +
          'the signal is kept until one of its steps takes it.\n',
      );
    }
    return 0;
  },
});
