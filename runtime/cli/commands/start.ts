import { createClient } from '../../client/client.js';
import type { DebounceOptions } from '../../client/debounce.js';
import {
  defineCommand,
  integerOption,
  UsageError,
  type OptionValues,
  type ParseArgsOptionsConfig,
} from '../command.js';
import { formatTime, toJsonDocument } from '../../presentation/format-values.js';
import { parseJsonOption } from '../json-option.js';
import { DEFAULT_WORKFLOWS_MODULE, loadWorkflowsOption } from '../load-workflows.js';
import { formatRunDetails } from './run.js';
import { loadStepDefs } from '../../client/run-step-label.js';

const startOptions = {
  input: { type: 'string' },
  'run-id': { type: 'string' },
  'dedupe-key': { type: 'string' },
  'on-different-input': { type: 'string' },
  'debounce-key': { type: 'string' },
  'debounce-ms': { type: 'string' },
  'debounce-keep': { type: 'string' },
  'debounce-max-wait': { type: 'string' },
  deadline: { type: 'string' },
  priority: { type: 'string' },
  workflows: { type: 'string' },
  wait: { type: 'boolean' },
  timeout: { type: 'string' },
} as const satisfies ParseArgsOptionsConfig;

export const startCommand = defineCommand({
  name: 'start',
  summary: 'start a run (validated, idempotent with --run-id / --dedupe-key)',
  usage:
    '<workflow> --input <json> [--run-id <uuid>] [--dedupe-key <key> [--on-different-input refuse|return-existing]]\n' +
    '         [--debounce-key <key> --debounce-ms <ms> --debounce-keep last|first [--debounce-max-wait <ms>]]\n' +
    '         [--deadline <ms>] [--priority <n>] [--workflows <module>] [--wait] [options]',
  description:
    "Validates the input with the workflow's schema (nothing is written if it is invalid) and creates a\n" +
    'pending run for a worker to pick up. Starting again with the same --run-id or --dedupe-key and the same\n' +
    'input returns the existing run; with another input it is refused (or, with --on-different-input\n' +
    'return-existing, the existing run is returned).\n\n' +
    'With --debounce-key, starts of the workflow with that key within --debounce-ms share one run, due when\n' +
    'the window ends: keep first keeps the first input; keep last takes each later input and moves the end\n' +
    'of the window to --debounce-ms after it (at most --debounce-max-wait after the first start). Once a\n' +
    'worker claimed the run, or the window is over, the next start creates a new run.',
  options: startOptions,
  optionsHelp: `  --input <json>         the run's input as JSON, or @file.json
  --run-id <uuid>        your id for the run
  --dedupe-key <key>     business key, unique per workflow (e.g. the order id)
  --on-different-input refuse|return-existing
                         when --run-id or --dedupe-key names a run with another input: refuse it
                         (default, exit 1) or return that run
  --debounce-key <key>   share one run with the other starts of this key within the window
  --debounce-ms <ms>     the window: the run is due this long after the start that opened it
                         (keep last: after the latest start)
  --debounce-keep last|first
                         which start's input the run gets
  --debounce-max-wait <ms>
                         keep last: due at most this long after the window's first start
  --deadline <ms>        cancel the run, children included, if it is unfinished this long after the
                         start (debounced: after the window ends; overrides the workflow's timeoutMs)
  --priority <n>         order among runs waiting for a slot of a queue: higher first (default 0;
                         a negative one as --priority=-5)
  --workflows <module>   module exporting \`workflows\` (default: ${DEFAULT_WORKFLOWS_MODULE})
  --wait                 wait until the run finishes or is parked; exit 1 unless it completed
  --timeout <ms>         how long --wait waits (default 60000); the run is not affected`,
  positionals: { min: 1, max: 1, names: 'one workflow name' },
  async run({ values, positionals, json, io, openStore }) {
    if (values.input === undefined)
      throw new UsageError("--input <json> is required (use --input '{}' for a workflow without input).");
    const input = parseJsonOption('input', values.input);
    const deadlineMs = integerOption('deadline', values.deadline);
    const priority = priorityOption(values.priority);
    const timeoutMs = integerOption('timeout', values.timeout) ?? 60_000;
    const onDifferentInput = choiceOption('on-different-input', values['on-different-input'], [
      'refuse',
      'return-existing',
    ]);
    const debounce = debounceOptions(values);
    const store = await openStore();
    const client = createClient({ store, workflows: await loadWorkflowsOption(values.workflows) });
    const { runId, created } = await client.start(positionals[0]!, input, {
      ...(values['run-id'] !== undefined ? { runId: values['run-id'] } : {}),
      ...(values['dedupe-key'] !== undefined ? { dedupeKey: values['dedupe-key'] } : {}),
      ...(onDifferentInput !== undefined ? { onDifferentInput } : {}),
      ...(debounce !== undefined ? { debounce } : {}),
      ...(deadlineMs !== undefined ? { timeoutMs: deadlineMs } : {}),
      ...(priority !== undefined ? { priority } : {}),
    });
    if (values.wait !== true) {
      const run = await client.getRun(runId);
      if (json) {
        io.out(
          toJsonDocument({
            runId,
            created,
            workflow: run.workflow_name,
            version: run.workflow_version,
            status: run.status,
            deadlineAt: run.deadline_at,
            ...(debounce !== undefined ? { debounceKey: debounce.key, runAfter: run.run_after } : {}),
          }),
        );
      } else if (created) {
        const deadline =
          run.deadline_at === null ? '' : `; cancelled if still unfinished at ${formatTime(run.deadline_at)}`;
        const due = debounce === undefined ? '' : `, due at ${formatTime(run.run_after)} when its debounce window ends`;
        io.out(`Started run ${runId} (${run.workflow_name} v${run.workflow_version})${due}${deadline}.\n`);
      } else if (debounce !== undefined) {
        const joined = run.status === 'pending' ? `, due at ${formatTime(run.run_after)}` : ` (${run.status})`;
        const input = debounce.keep === 'last' ? 'its input is now this one' : 'this input was ignored (keep first)';
        io.out(`Joined the open debounce window of key "${debounce.key}": run ${runId}${joined}; ${input}.\n`);
      } else {
        const same = onDifferentInput === 'return-existing' ? '' : ' with this input';
        io.out(`Run ${runId} already exists${same} (${run.status}); not started again.\n`);
      }
      return 0;
    }
    if (!json) io.err(`${created ? 'Started' : 'Found existing'} run ${runId}; waiting up to ${timeoutMs} ms…\n`);
    await client.waitForRun(runId, { timeoutMs });
    const run = await client.getRun(runId);
    io.out(json ? toJsonDocument({ runId, created, run }) : formatRunDetails(run, await loadStepDefs(store.db, [run])));
    return run.status === 'completed' ? 0 : 1;
  },
});

/** A string option limited to `choices`, or `undefined` when absent. */
function choiceOption<C extends string>(name: string, value: string | undefined, choices: readonly C[]): C | undefined {
  if (value === undefined) return undefined;
  if (!(choices as readonly string[]).includes(value))
    throw new UsageError(`--${name} must be one of ${choices.join(', ')} (got "${value}").`);
  return value as C;
}

/** `--debounce-*` as `start`'s debounce option: the key, the window and keep come together or not at all. */
function debounceOptions(values: OptionValues<typeof startOptions>): DebounceOptions | undefined {
  const key = values['debounce-key'];
  const windowMs = integerOption('debounce-ms', values['debounce-ms']);
  const keep = choiceOption('debounce-keep', values['debounce-keep'], ['last', 'first']);
  const maxWaitMs = integerOption('debounce-max-wait', values['debounce-max-wait']);
  if (key === undefined) {
    if (windowMs !== undefined || keep !== undefined || maxWaitMs !== undefined) {
      throw new UsageError('--debounce-ms, --debounce-keep and --debounce-max-wait need --debounce-key <key>.');
    }
    return undefined;
  }
  if (windowMs === undefined || keep === undefined) {
    throw new UsageError('--debounce-key needs --debounce-ms <ms> and --debounce-keep last|first.');
  }
  return { key, windowMs, keep, ...(maxWaitMs !== undefined ? { maxWaitMs } : {}) };
}

/** `--priority`: an integer, negative allowed (the client checks its range). */
function priorityOption(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^-?\d+$/.test(value)) throw new UsageError(`--priority must be an integer (got "${value}").`);
  return Number(value);
}
