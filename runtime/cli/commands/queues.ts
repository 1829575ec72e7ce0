import { createClient } from '../../client/client.js';
import type { QueuePartitionSummary, QueueSummary } from '../../client/queues.js';
import { defineCommand, integerOption, UsageError } from '../command.js';
import { formatTable } from '../format-table.js';
import { formatLimits } from '../../presentation/format-limits.js';
import { formatTime, toJsonDocument } from '../../presentation/format-values.js';
import { NOTE_OPTIONS, NOTE_OPTIONS_HELP, noteOption } from '../operator-note.js';

const ACTIONS = ['pause', 'resume'] as const;

export const queuesCommand = defineCommand({
  name: 'queues',
  summary: 'list queues: limits, slots in flight, runs waiting (--partitions); pause or resume one',
  usage:
    '[--queue <name>] [--partitions [--limit <n>]] [options]\n       ledgerflow queues pause|resume <name> --reason <text> [--actor <name>] [options]',
  description:
    'Lists the queues workers registered: their limits (at once, per period, per partition), the slots held now\n' +
    'across all workers, the runs waiting for a slot and since when the oldest waits, and, when a rate limit\n' +
    'holds the next grant back, until when. With --partitions, also the partitions of each queue that hold\n' +
    'slots or have runs waiting: those with runs waiting first, in the order they will be served (highest\n' +
    'waiting priority, then the one served longest ago), then those that only hold slots. `*` is the\n' +
    'partition of the uses of a queue without a partitionKey.\n\n' +
    '`pause <name>` stops the queue from granting slots: runs in line wait, slots held are kept until given\n' +
    'back; `resume <name>` grants at once what the limits allow. Both are written to the audit trail and kept\n' +
    'when workers register the queue again.',
  options: {
    queue: { type: 'string' },
    partitions: { type: 'boolean' },
    limit: { type: 'string' },
    ...NOTE_OPTIONS,
  },
  optionsHelp: [
    '  --queue <name>         only this queue (exit 1 if no worker registered it)',
    '  --partitions           also list partitions',
    '  --limit <n>            partitions listed per queue (default 20, at most 1000)',
    NOTE_OPTIONS_HELP,
  ].join('\n'),
  positionals: { min: 0, max: 2, names: 'nothing, or pause <name> / resume <name>' },
  async run({ values, positionals, json, io, openStore }) {
    const [action, name] = positionals;
    if (action !== undefined) {
      if (!(ACTIONS as readonly string[]).includes(action)) {
        throw new UsageError(
          `Unknown action "${action}". Use \`ledgerflow queues\`, \`queues pause <name>\` or \`queues resume <name>\`.`,
        );
      }
      if (name === undefined)
        throw new UsageError(`${action} needs the queue's name: ledgerflow queues ${action} <name> --reason <text>.`);
      const note = noteOption(values, true, `a queue ${action}`)!;
      const client = createClient({ store: await openStore() });
      const paused = action === 'pause';
      const changed = paused ? await client.pauseQueue(name, note) : await client.resumeQueue(name, note);
      if (json) io.out(toJsonDocument({ queue: name, paused, changed }));
      else if (!changed) io.out(`Queue ${name} was already ${paused ? 'paused' : 'running'}.\n`);
      else if (paused) io.out(`Paused queue ${name}: it grants no slot until \`ledgerflow queues resume ${name}\`.\n`);
      else io.out(`Resumed queue ${name}: slots are granted again as its limits allow.\n`);
      return 0;
    }
    if (values.reason !== undefined || values.actor !== undefined) {
      throw new UsageError('--reason and --actor go with `queues pause <name>` or `queues resume <name>`.');
    }
    const partitionLimit = integerOption('limit', values.limit);
    if (partitionLimit !== undefined && values.partitions !== true) {
      throw new UsageError('--limit is the number of partitions listed per queue; add --partitions.');
    }
    if (partitionLimit !== undefined && partitionLimit > 1_000)
      throw new UsageError(`--limit must be at most 1000 (got ${partitionLimit}).`);
    const queues = await createClient({ store: await openStore() }).listQueues({
      ...(values.queue !== undefined ? { queue: values.queue } : {}),
      partitions: values.partitions === true,
      ...(partitionLimit !== undefined ? { partitionLimit } : {}),
    });
    if (json) {
      io.out(toJsonDocument(queues));
      return 0;
    }
    if (queues.length === 0) {
      io.out('No queues are registered. A worker registers the queues of the workflows it serves when it starts.\n');
      return 0;
    }
    io.out(
      formatTable(queues, [
        { header: 'QUEUE', value: (q) => q.name },
        { header: 'LIMITS', value: (q) => formatLimits(q.limits) },
        { header: 'IN FLIGHT', value: (q) => String(q.inFlight), align: 'right' },
        { header: 'WAITING', value: (q) => String(q.waiting), align: 'right' },
        { header: 'PARTITIONS WAITING', value: (q) => String(q.partitionsWaiting), align: 'right' },
        { header: 'OLDEST WAITING', value: (q) => formatTime(q.oldestWaitingSince) },
        { header: 'RATE-LIMITED UNTIL', value: (q) => formatTime(q.rateLimitedUntil) },
        { header: 'PAUSED', value: (q) => (q.paused ? 'yes' : 'no') },
      ]),
    );
    if (values.partitions === true) io.out(`\n${formatPartitions(queues)}`);
    return 0;
  },
});

function formatPartitions(queues: readonly QueueSummary[]): string {
  const rows = queues.flatMap((q) => (q.partitions ?? []).map((p) => ({ queue: q.name, ...p })));
  const table =
    rows.length === 0
      ? 'No partition holds a slot or has runs waiting.\n'
      : formatTable<QueuePartitionSummary & { readonly queue: string }>(rows, [
          { header: 'QUEUE', value: (p) => p.queue },
          { header: 'PARTITION', value: (p) => p.partition },
          { header: 'IN FLIGHT', value: (p) => String(p.inFlight), align: 'right' },
          { header: 'WAITING', value: (p) => String(p.waiting), align: 'right' },
          { header: 'PRIORITY', value: (p) => (p.topPriority === null ? '-' : String(p.topPriority)), align: 'right' },
          { header: 'OLDEST WAITING', value: (p) => formatTime(p.oldestWaitingSince) },
          { header: 'LAST GRANTED', value: (p) => formatTime(p.lastGrantedAt) },
        ]);
  const more = queues
    .filter((q) => q.morePartitions === true)
    .map(
      (q) =>
        `${q.name}: more partitions hold slots or have runs waiting than the ${q.partitions?.length ?? 0} listed; --limit <n> lists more.\n`,
    );
  return table + more.join('');
}
