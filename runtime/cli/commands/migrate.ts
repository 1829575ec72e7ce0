import { CORE_PREFIX } from '../../migrate/core-migrations.js';
import { migrate } from '../../migrate/migrate.js';
import { DEFAULT_MIGRATIONS_DIR } from '../../migrate/migration-source.js';
import { defineCommand } from '../command.js';
import { toJsonDocument } from '../../presentation/format-values.js';

export const migrateCommand = defineCommand({
  name: 'migrate',
  summary: "apply ledgerflow's core migrations, then generated/migrations/*.sql (safe to repeat)",
  usage: '[--dir <directory>]... [options]',
  description:
    "Applies ledgerflow's core migrations (they ship with the package, recorded as core/NNNN_name.sql), then\n" +
    'the numbered SQL migrations of the directories, those not yet recorded in ledgerflow.schema_migration,\n' +
    'in order, each in its own transaction. Safe to run concurrently. Refuses to run if an applied file\n' +
    'changed since (migrations are append-only) — but the migration of a draft workflow version, which it\n' +
    'runs again in place of what it registered, as long as that version has no runs (docs/versions.md).\n' +
    'A 0001_core.sql written by an earlier ledgerflow codegen\n' +
    'is recognised as superseded by the core migrations: it may stay, and is never run.',
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
    for (const name of result.adopted) {
      io.out(`adopted  ${name} (its schema was created by the 0001_core.sql of an earlier ledgerflow)\n`);
    }
    for (const name of result.replaced) {
      io.out(`replaced  ${name} (a changed draft workflow version without runs: registered again as it is now)\n`);
    }
    for (const name of result.superseded) {
      io.out(`superseded  ${name} (an earlier ledgerflow's core schema, replaced by the core migrations; not run)\n`);
    }
    for (const name of result.unknown) {
      io.err(
        name.startsWith(CORE_PREFIX)
          ? `warning: ${name} is recorded in the database but this ledgerflow does not ship it (migrated by a newer ledgerflow?)\n`
          : `warning: ${name} is recorded in the database but is in none of ${sources.join(', ')}\n`,
      );
    }
    io.out(
      `${store.location}: ${result.applied.length} migration(s) applied, ` +
        `${result.skipped.length + result.adopted.length} already applied.\n`,
    );
    return 0;
  },
});
