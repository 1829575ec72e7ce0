import { createClient } from '../../client/client.js';
import type { EffectResolution } from '../../client/operator/resolve.js';
import { defineCommand, UsageError } from '../command.js';
import { formatJson, toJsonDocument } from '../../presentation/format-values.js';
import { parseJsonOption } from '../json-option.js';
import { DEFAULT_WORKFLOWS_MODULE, loadWorkflowsOption } from '../load-workflows.js';
import { NOTE_OPTIONS, NOTE_OPTIONS_HELP, noteOption } from '../operator-note.js';

export const resolveCommand = defineCommand({
  name: 'resolve',
  summary: "settle a step's open intent by hand: the effect was found, or not (audited)",
  usage:
    '<run-id> <step> (--found <json> | --not-found) --reason <text> [--actor <name>] [--workflows <module>] [options]',
  description:
    'For an external step whose outcome is unknown (an open intent), say what you found at the provider, as\n' +
    "the step's reconcile() would: --found <json> records the effect with that output (checked against the\n" +
    "step's output schema) and the run goes on without calling the provider; --not-found releases the key, so\n" +
    'the step performs again with the same key when the run goes on (a run parked after its attempts ran out\n' +
    'fails instead: retry it). A failed or cancelled run stays so: only the ledger is settled. Refused (exit\n' +
    '1, nothing written) when the step has no open intent or a worker holds the run right now. <step> may be a\n' +
    'compensation (a refund parked with an unknown outcome); --found on the last one ends the run compensated.\n' +
    'Written to the audit trail.',
  options: {
    found: { type: 'string' },
    'not-found': { type: 'boolean' },
    workflows: { type: 'string' },
    ...NOTE_OPTIONS,
  },
  optionsHelp: `  --found <json>         the step's output, as the provider shows it (JSON, or @file.json)
  --not-found            the provider has no such effect
${NOTE_OPTIONS_HELP}
  --workflows <module>   module exporting \`workflows\`, for the step's output schema (default:
                         ${DEFAULT_WORKFLOWS_MODULE})`,
  positionals: { min: 2, max: 2, names: '<run-id> <step>' },
  async run({ values, positionals, json, io, openStore }) {
    const [runId, step] = positionals as [string, string];
    if ((values.found === undefined) === (values['not-found'] !== true)) {
      throw new UsageError(
        'Say what you found: either --found <json> (the effect happened, with this output) or --not-found.',
      );
    }
    const resolution: EffectResolution =
      values.found !== undefined ? { found: parseJsonOption('found', values.found) } : { notFound: true };
    const note = noteOption(values, true, 'a resolution')!;
    const client = createClient({ store: await openStore(), workflows: await loadWorkflowsOption(values.workflows) });
    const resolved = await client.resolveEffect(runId, step, resolution, note);
    if (json) {
      io.out(toJsonDocument(resolved));
    } else if (resolved.status === 'recorded') {
      const output = 'found' in resolution ? formatJson(resolution.found, 200) : '';
      io.out(
        `Recorded the effect of step "${step}" (key ${resolved.idempotencyKey}) with output ${output}; run ${runId} is ${resolved.runStatus}.\n`,
      );
    } else {
      io.out(
        `Released key ${resolved.idempotencyKey} of step "${step}": the step performs again with this key when the run goes on; ` +
          `run ${runId} is ${resolved.runStatus}.\n`,
      );
    }
    return 0;
  },
});
