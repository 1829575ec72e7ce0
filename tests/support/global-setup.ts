import type {} from 'vitest';
import type { TestProject } from 'vitest/node';
import { startPgBouncer } from './pgbouncer.js';
import { startPostgres, type PostgresServer } from './postgres-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Superuser URL of the PostgreSQL server under test (from DATABASE_URL or started here). */
    postgresUrl: string;
    /**
     * The `pgbouncer` project only: the same server's `postgres` database through a PgBouncer in
     * transaction pooling mode, which `createPgTestStore` puts its stores behind.
     */
    pgbouncerUrl?: string;
  }
}

/**
 * Uses DATABASE_URL when given; otherwise starts a throwaway server for the project's run and
 * returns its teardown (each project — `main`, `chaos` — that runs gets its own server). The
 * `pgbouncer` project also gets a PgBouncer (transaction pooling) in front of that server.
 */
export async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const given = process.env['DATABASE_URL'];
  const server: PostgresServer | undefined = given ? undefined : await startPostgres();
  const postgresUrl = given || server!.url;
  project.provide('postgresUrl', postgresUrl);
  if (project.name !== 'pgbouncer') return server === undefined ? undefined : () => server.destroy();
  try {
    const bouncer = await startPgBouncer({ server: postgresUrl });
    project.provide('pgbouncerUrl', bouncer.urlFor('postgres'));
    return async () => {
      await bouncer.stop();
      await server?.destroy();
    };
  } catch (error) {
    await server?.destroy();
    throw error;
  }
}
