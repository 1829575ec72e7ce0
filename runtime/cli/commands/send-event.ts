import { createClient } from '../../client/client.js';
import { defineCommand, UsageError } from '../command.js';
import { toJsonDocument } from '../../presentation/format-values.js';
import { parseJsonOption } from '../json-option.js';
import { DEFAULT_WORKFLOWS_MODULE, loadWorkflowsOption } from '../load-workflows.js';

export const sendEventCommand = defineCommand({
  name: 'send-event',
  summary: 'send an event to the runs waiting for it (validated, idempotent with --dedupe-key)',
  usage: '<event> <key> --payload <json> [--dedupe-key <key>] [--workflows <module>] [options]',
  description:
    "Validates the payload with the event's schema (nothing is written if it is invalid), stores the event and\n" +
    'wakes the runs whose waitFor step waits for it with this correlation key. An event nobody waits for yet\n' +
    'is kept until a step takes it; each event is taken by one step, once. Sending again with the same\n' +
    '--dedupe-key, key and payload stores nothing new; with another key or payload it is refused.',
  options: {
    payload: { type: 'string' },
    'dedupe-key': { type: 'string' },
    workflows: { type: 'string' },
  },
  optionsHelp: `  --payload <json>       the event's payload as JSON, or @file.json
  --dedupe-key <key>     your id for the event (e.g. the provider's event id)
  --workflows <module>   module exporting \`workflows\` that wait for the event (default:
                         ${DEFAULT_WORKFLOWS_MODULE})`,
  positionals: { min: 2, max: 2, names: 'an event name and a correlation key' },
  async run({ values, positionals, json, io, openStore }) {
    const [eventName, key] = positionals as [string, string];
    if (values.payload === undefined)
      throw new UsageError("--payload <json> is required (use --payload '{}' for an event without a payload).");
    const payload = parseJsonOption('payload', values.payload);
    const client = createClient({ store: await openStore(), workflows: await loadWorkflowsOption(values.workflows) });
    const dedupeKey = values['dedupe-key'];
    const sent = await client.sendEvent(eventName, key, payload, dedupeKey !== undefined ? { dedupeKey } : {});
    if (json) {
      io.out(toJsonDocument({ eventId: sent.eventId, created: sent.created, woke: sent.woke, event: eventName, key }));
    } else if (!sent.created) {
      io.out(`Event ${sent.eventId} was already sent with dedupe key "${dedupeKey}"; nothing new was stored.\n`);
    } else if (sent.woke > 0) {
      io.out(`Sent event ${eventName} with key ${key} (${sent.eventId}); woke ${sent.woke} waiting run(s).\n`);
    } else {
      io.out(
        `Sent event ${eventName} with key ${key} (${sent.eventId}). No run waits for it yet: it is kept until a step waiting for it takes it.\n`,
      );
    }
    return 0;
  },
});
