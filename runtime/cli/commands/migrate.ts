import { migrate } from '../../migrate/migrate.js';
import { DEFAULT_MIGRATIONS_DIR } from '../../migrate/migration-source.js';
import { defineCommand } from '../command.js';
import { toJsonDocument } from '../format-values.js';

export const migrateCommand = defineCommand({
  name: 'migrate',
  summary: 'apply generated/migrations/*.sql (safe to repeat and to run concurrently)',
  usage: '[--dir <directory>]... [options]',
  description:
    'Applies the numbered SQL migrations not yet recorded in ledgerflow.schema_migration, in order, each in\n' +
    'its own transaction. Refuses to run if an applied file changed since (migrations are append-only).',
  options: { dir: { type: 'string', multiple: true } },
  optionsHelp: `  --dir <directory>      migrations directory; repeatable, names must be unique across them
                         (default: ${DEFAULT_MIGRATIONS_DIR})`,
  positionals: { min: 0, max: 0, names: '' },
  async run({ values, json, io, openStore }) {
    const store = await openStore();
    const sources = values.dir ?? [DEFAULT_MIGRATIONS_DIR];
    const result = await migrate(store, {
      sources,
      ...(json ? {} : { onApplied: (m) => io.out(`applied  ${m.name}\n`) }),
    });
    if (json) {
      io.out(toJsonDocument({ database: store.location, ...result }));
      return 0;
    }
    for (const name of result.unknown) {
      io.err(`warning: ${name} is recorded in the database but is in none of ${sources.join(', ')}\n`);
    }
    io.out(
      `${store.location}: ${result.applied.length} migration(s) applied, ${result.skipped.length} already applied.\n`,
    );
    return 0;
  },
});
