import { LIMITS_CACHE_MS } from '../../limits/limits-cache.js';
import {
  LIMIT_OPTIONS,
  MAX_JSON_DEPTH,
  PAYLOAD_LIMIT_RANGES,
  readPayloadLimits,
  setPayloadLimits,
  type PayloadLimits,
} from '../../limits/payload-limits.js';
import { defineCommand, integerOption, UsageError } from '../command.js';
import { formatTable } from '../format-table.js';
import { formatTime, toJsonDocument } from '../../presentation/format-values.js';

const LIMIT_NAMES = Object.keys(LIMIT_OPTIONS) as (keyof PayloadLimits)[];

const WHAT: Readonly<Record<keyof PayloadLimits, string>> = {
  maxInputBytes: 'run input (refused above)',
  maxOutputBytes: 'step output (the step fails above)',
  maxEventPayloadBytes: 'event payload (refused above)',
  maxErrorBytes: 'error record (truncated above)',
};

export const limitsCommand = defineCommand({
  name: 'limits',
  summary: 'show or set the size limits of run inputs, step outputs, event payloads and error records',
  usage:
    '[options]\n       ledgerflow limits set [--max-input-bytes <n>] [--max-output-bytes <n>] [--max-event-payload-bytes <n>] [--max-error-bytes <n>] [options]',
  description:
    'Shows the largest JSON (UTF-8 bytes) ledgerflow writes for a run input, a step output, an event payload and\n' +
    'an error record. The limits are stored in the database, so every client and worker of it applies the same;\n' +
    `\`limits set\` changes them for all of them, each within ${LIMITS_CACHE_MS / 1000} s. An input or event payload over its limit is\n` +
    'refused before anything is sent to the database; a step whose output is over its limit fails (not retried);\n' +
    `an error record over its limit is truncated, with a marker. JSON may nest at most ${MAX_JSON_DEPTH} levels (fixed).`,
  options: {
    'max-input-bytes': { type: 'string' },
    'max-output-bytes': { type: 'string' },
    'max-event-payload-bytes': { type: 'string' },
    'max-error-bytes': { type: 'string' },
  },
  optionsHelp: [
    `  --max-input-bytes <n>          with set: run inputs (${range('maxInputBytes')})`,
    `  --max-output-bytes <n>         with set: step outputs (${range('maxOutputBytes')})`,
    `  --max-event-payload-bytes <n>  with set: event payloads (${range('maxEventPayloadBytes')})`,
    `  --max-error-bytes <n>          with set: error records (${range('maxErrorBytes')})`,
  ].join('\n'),
  positionals: { min: 0, max: 1, names: 'nothing, or set' },
  async run({ values, positionals, json, io, openStore }) {
    const [action] = positionals;
    const change: Partial<Record<keyof PayloadLimits, number>> = {};
    for (const name of LIMIT_NAMES) {
      const option = LIMIT_OPTIONS[name].slice(2) as keyof typeof values;
      const value = integerOption(option, values[option] as string | undefined);
      if (value !== undefined) change[name] = value;
    }
    if (action !== undefined && action !== 'set') {
      throw new UsageError(
        `Unknown action "${action}". Use \`ledgerflow limits\` to show them or \`ledgerflow limits set --max-input-bytes <n> …\`.`,
      );
    }
    if (action === undefined && Object.keys(change).length > 0) {
      throw new UsageError('The --max-…-bytes options go with `ledgerflow limits set`.');
    }
    if (action === 'set' && Object.keys(change).length === 0) {
      throw new UsageError(`limits set needs at least one of ${Object.values(LIMIT_OPTIONS).join(', ')}.`);
    }
    const db = (await openStore()).db;
    const limits = action === 'set' ? await setPayloadLimits(db, change) : await readPayloadLimits(db);
    if (json) {
      io.out(toJsonDocument({ ...limits, maxJsonDepth: MAX_JSON_DEPTH }));
      return 0;
    }
    io.out(
      formatTable(LIMIT_NAMES, [
        { header: 'LIMIT', value: (name) => WHAT[name] },
        { header: 'BYTES', value: (name) => String(limits[name]), align: 'right' },
        { header: 'OPTION', value: (name) => LIMIT_OPTIONS[name] },
      ]),
    );
    if (action === 'set')
      io.out(`Changed: every client and worker of this database applies these within ${LIMITS_CACHE_MS / 1000} s.\n`);
    else io.out(`Last changed ${formatTime(limits.updatedAt)}.\n`);
    return 0;
  },
});

function range(name: keyof PayloadLimits): string {
  const { min, max } = PAYLOAD_LIMIT_RANGES[name];
  return `${min} to ${max}`;
}
