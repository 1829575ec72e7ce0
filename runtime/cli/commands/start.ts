import { existsSync, readFileSync } from 'node:fs';
import { createClient } from '../../client/client.js';
import { defineCommand, integerOption, UsageError } from '../command.js';
import { toJsonDocument } from '../format-values.js';
import { DEFAULT_WORKFLOWS_MODULE, loadWorkflowsModule } from '../load-workflows.js';
import { formatRunDetails } from './run.js';

export const startCommand = defineCommand({
  name: 'start',
  summary: 'start a run (validated, idempotent with --run-id / --dedupe-key)',
  usage: '<workflow> --input <json> [--run-id <uuid>] [--dedupe-key <key>] [--workflows <module>] [--wait] [options]',
  description:
    "Validates the input with the workflow's schema (nothing is written if it is invalid) and creates a\n" +
    'pending run for a worker to pick up. Starting again with the same --run-id or --dedupe-key and the same\n' +
    'input returns the existing run; with another input it is refused.',
  options: {
    input: { type: 'string' },
    'run-id': { type: 'string' },
    'dedupe-key': { type: 'string' },
    workflows: { type: 'string' },
    wait: { type: 'boolean' },
    timeout: { type: 'string' },
  },
  optionsHelp: `  --input <json>         the run's input as JSON, or @file.json
  --run-id <uuid>        your id for the run
  --dedupe-key <key>     business key, unique per workflow (e.g. the order id)
  --workflows <module>   module exporting \`workflows\` (default: ${DEFAULT_WORKFLOWS_MODULE})
  --wait                 wait until the run finishes or is parked; exit 1 unless it completed
  --timeout <ms>         how long --wait waits (default 60000)`,
  positionals: { min: 1, max: 1, names: 'one workflow name' },
  async run({ values, positionals, json, io, openStore }) {
    const input = parseInput(values.input);
    const timeoutMs = integerOption('timeout', values.timeout) ?? 60_000;
    const modulePath = values.workflows ?? DEFAULT_WORKFLOWS_MODULE;
    if (values.workflows === undefined && !existsSync(modulePath)) {
      throw new UsageError(
        `No --workflows module given and ${DEFAULT_WORKFLOWS_MODULE} does not exist. Run \`ledgerflow codegen\` or pass --workflows <module>.`,
      );
    }
    const client = createClient({ store: await openStore(), workflows: await loadWorkflowsModule(modulePath) });
    const { runId, created } = await client.start(positionals[0]!, input, {
      ...(values['run-id'] !== undefined ? { runId: values['run-id'] } : {}),
      ...(values['dedupe-key'] !== undefined ? { dedupeKey: values['dedupe-key'] } : {}),
    });
    if (values.wait !== true) {
      const run = await client.getRun(runId);
      if (json) io.out(toJsonDocument({ runId, created, workflow: run.workflow_name, version: run.workflow_version, status: run.status }));
      else if (created) io.out(`Started run ${runId} (${run.workflow_name} v${run.workflow_version}).\n`);
      else io.out(`Run ${runId} already exists with this input (${run.status}); not started again.\n`);
      return 0;
    }
    if (!json) io.err(`${created ? 'Started' : 'Found existing'} run ${runId}; waiting up to ${timeoutMs} ms…\n`);
    const run = await client.waitForRun(runId, { timeoutMs });
    io.out(json ? toJsonDocument({ runId, created, run }) : formatRunDetails(run));
    return run.status === 'completed' ? 0 : 1;
  },
});

function parseInput(raw: string | undefined): unknown {
  if (raw === undefined) throw new UsageError("--input <json> is required (use --input '{}' for a workflow without input).");
  let text = raw;
  let where = '--input';
  if (raw.startsWith('@')) {
    const file = raw.slice(1);
    if (!existsSync(file)) throw new UsageError(`--input ${raw}: no such file.`);
    text = readFileSync(file, 'utf8');
    where = `--input file ${file}`;
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new UsageError(`${where} is not valid JSON: ${(error as Error).message}`);
  }
}
