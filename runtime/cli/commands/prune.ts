import { pruneRuns } from '../../retention/prune.js';
import { defineCommand, integerOption, UsageError } from '../command.js';
import { durationOption } from '../duration-option.js';
import { toJsonDocument } from '../../presentation/format-values.js';

export const pruneCommand = defineCommand({
  name: 'prune',
  summary: 'delete finished runs older than a duration, keeping their identity in the archive',
  usage:
    '--completed-older-than <duration> [--events-older-than <duration>] [--unconsumed-events-older-than <duration>] ' +
    '[--batch-size <n>] [--dry-run] [--archive-older-than <duration>] [options]',
  description:
    'Deletes completed, failed, cancelled, compensated and compensation_failed runs that finished longer ago\n' +
    'than --completed-older-than, with their results, attempts, waits and ledger rows, in batches of\n' +
    '--batch-size runs (one short transaction each, SKIP LOCKED: concurrent prunes and workers never wait for\n' +
    'each other). Each pruned run leaves a tombstone (id, workflow, dedupe key, input hash, final status) and\n' +
    'its recorded effects in the archive, so a start with its id or dedupe key returns it instead of running\n' +
    'it again. Never deleted: unfinished runs, runs with an open intent, runs whose children are not pruned\n' +
    'yet, children of unfinished runs, children of failed or cancelled runs that stay (a retry reads them).\n' +
    'Events are kept unless asked: --events-older-than deletes events consumed that long ago (the step that\n' +
    'took one keeps its payload), --unconsumed-events-older-than events no step took in that long; an event\n' +
    'with a dedupe key leaves a tombstone, so sending it again stores nothing.\n' +
    'Durations: a whole number and d, h, m, s or ms (30d, 12h, 90m).',
  options: {
    'completed-older-than': { type: 'string' },
    'batch-size': { type: 'string' },
    'dry-run': { type: 'boolean' },
    'archive-older-than': { type: 'string' },
    'events-older-than': { type: 'string' },
    'unconsumed-events-older-than': { type: 'string' },
  },
  optionsHelp: `  --completed-older-than <duration>
                         prune runs that finished at least this long ago (required)
  --events-older-than <duration>
                         also prune events consumed at least this long ago
  --unconsumed-events-older-than <duration>
                         also prune events that no step took and that were sent at least this long
                         ago (a run that waits for one later will not find it)
  --batch-size <n>       runs (or events) deleted per transaction (default 1000, at most 10000)
  --dry-run              count what would be pruned; delete nothing
  --archive-older-than <duration>
                         also delete the archived identities of runs finished, and of events sent,
                         this long ago (at least each other --…-older-than); a start or a send with
                         their key then happens again. Default: the archive is kept forever`,
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, json, io, openStore }) {
    const olderThanMs = durationOption('completed-older-than', values['completed-older-than']);
    if (olderThanMs === undefined) {
      throw new UsageError('--completed-older-than <duration> is required, e.g. --completed-older-than 30d.');
    }
    const archiveOlderThanMs = durationOption('archive-older-than', values['archive-older-than']);
    if (archiveOlderThanMs !== undefined && archiveOlderThanMs < olderThanMs) {
      throw new UsageError(
        `--archive-older-than (${values['archive-older-than']}) must be at least --completed-older-than (${values['completed-older-than']}): ` +
          'the archive protects the keys of pruned runs, so it must outlive them.',
      );
    }
    const eventsOlderThanMs = durationOption('events-older-than', values['events-older-than']);
    const unconsumedEventsOlderThanMs = durationOption(
      'unconsumed-events-older-than',
      values['unconsumed-events-older-than'],
    );
    for (const [flag, ms] of [
      ['events-older-than', eventsOlderThanMs],
      ['unconsumed-events-older-than', unconsumedEventsOlderThanMs],
    ] as const) {
      if (archiveOlderThanMs !== undefined && ms !== undefined && archiveOlderThanMs < ms) {
        throw new UsageError(
          `--archive-older-than (${values['archive-older-than']}) must be at least --${flag} (${values[flag]}): ` +
            'the archive protects the dedupe keys of pruned events, so it must outlive them.',
        );
      }
    }
    const batchSize = integerOption('batch-size', values['batch-size']);
    const report = await pruneRuns((await openStore()).db, {
      olderThanMs,
      ...(eventsOlderThanMs !== undefined ? { eventsOlderThanMs } : {}),
      ...(unconsumedEventsOlderThanMs !== undefined ? { unconsumedEventsOlderThanMs } : {}),
      ...(batchSize !== undefined ? { batchSize } : {}),
      ...(archiveOlderThanMs !== undefined ? { archiveOlderThanMs } : {}),
      dryRun: values['dry-run'] === true,
    });
    if (json) {
      io.out(toJsonDocument(report));
    } else {
      const verb = report.dryRun ? 'would be pruned' : 'pruned';
      io.out(
        `${report.runsPruned} run(s) ${verb}, ${report.effectsArchived} recorded effect(s) ${report.dryRun ? 'to archive' : 'archived'}` +
          (archiveOlderThanMs !== undefined
            ? `, ${report.archiveDeleted} archived run(s) ${report.dryRun ? 'to delete' : 'deleted'}`
            : '') +
          (eventsOlderThanMs !== undefined || unconsumedEventsOlderThanMs !== undefined
            ? `, ${report.eventsPruned} event(s) ${verb} (${report.eventsArchived} kept as tombstones)`
            : '') +
          (archiveOlderThanMs !== undefined &&
          (eventsOlderThanMs !== undefined ||
            unconsumedEventsOlderThanMs !== undefined ||
            report.eventArchiveDeleted > 0)
            ? `, ${report.eventArchiveDeleted} event tombstone(s) ${report.dryRun ? 'to delete' : 'deleted'}`
            : '') +
          ` — ${report.batches} batch(es), ${report.ms} ms.\n`,
      );
    }
    return 0;
  },
});
