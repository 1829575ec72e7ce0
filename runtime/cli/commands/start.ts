import { createClient } from '../../client/client.js';
import { defineCommand, integerOption, UsageError } from '../command.js';
import { formatTime, toJsonDocument } from '../format-values.js';
import { parseJsonOption } from '../json-option.js';
import { DEFAULT_WORKFLOWS_MODULE, loadWorkflowsOption } from '../load-workflows.js';
import { formatRunDetails } from './run.js';

export const startCommand = defineCommand({
  name: 'start',
  summary: 'start a run (validated, idempotent with --run-id / --dedupe-key)',
  usage: '<workflow> --input <json> [--run-id <uuid>] [--dedupe-key <key>] [--deadline <ms>] [--workflows <module>] [--wait] [options]',
  description:
    "Validates the input with the workflow's schema (nothing is written if it is invalid) and creates a\n" +
    'pending run for a worker to pick up. Starting again with the same --run-id or --dedupe-key and the same\n' +
    'input returns the existing run; with another input it is refused.',
  options: {
    input: { type: 'string' },
    'run-id': { type: 'string' },
    'dedupe-key': { type: 'string' },
    deadline: { type: 'string' },
    workflows: { type: 'string' },
    wait: { type: 'boolean' },
    timeout: { type: 'string' },
  },
  optionsHelp: `  --input <json>         the run's input as JSON, or @file.json
  --run-id <uuid>        your id for the run
  --dedupe-key <key>     business key, unique per workflow (e.g. the order id)
  --deadline <ms>        cancel the run, children included, if it is unfinished this long after the
                         start (overrides the workflow's timeoutMs)
  --workflows <module>   module exporting \`workflows\` (default: ${DEFAULT_WORKFLOWS_MODULE})
  --wait                 wait until the run finishes or is parked; exit 1 unless it completed
  --timeout <ms>         how long --wait waits (default 60000); the run is not affected`,
  positionals: { min: 1, max: 1, names: 'one workflow name' },
  async run({ values, positionals, json, io, openStore }) {
    if (values.input === undefined) throw new UsageError("--input <json> is required (use --input '{}' for a workflow without input).");
    const input = parseJsonOption('input', values.input);
    const deadlineMs = integerOption('deadline', values.deadline);
    const timeoutMs = integerOption('timeout', values.timeout) ?? 60_000;
    const client = createClient({ store: await openStore(), workflows: await loadWorkflowsOption(values.workflows) });
    const { runId, created } = await client.start(positionals[0]!, input, {
      ...(values['run-id'] !== undefined ? { runId: values['run-id'] } : {}),
      ...(values['dedupe-key'] !== undefined ? { dedupeKey: values['dedupe-key'] } : {}),
      ...(deadlineMs !== undefined ? { timeoutMs: deadlineMs } : {}),
    });
    if (values.wait !== true) {
      const run = await client.getRun(runId);
      if (json) {
        io.out(
          toJsonDocument({ runId, created, workflow: run.workflow_name, version: run.workflow_version, status: run.status, deadlineAt: run.deadline_at }),
        );
      } else if (created) {
        const deadline = run.deadline_at === null ? '' : `; cancelled if still unfinished at ${formatTime(run.deadline_at)}`;
        io.out(`Started run ${runId} (${run.workflow_name} v${run.workflow_version})${deadline}.\n`);
      } else {
        io.out(`Run ${runId} already exists with this input (${run.status}); not started again.\n`);
      }
      return 0;
    }
    if (!json) io.err(`${created ? 'Started' : 'Found existing'} run ${runId}; waiting up to ${timeoutMs} ms…\n`);
    const run = await client.waitForRun(runId, { timeoutMs });
    io.out(json ? toJsonDocument({ runId, created, run }) : formatRunDetails(run));
    return run.status === 'completed' ? 0 : 1;
  },
});
