import type {} from 'vitest';
import type { TestProject } from 'vitest/node';
import { startPostgres, type PostgresServer } from './postgres-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Superuser URL of the PostgreSQL server under test (from DATABASE_URL or started here). */
    postgresUrl: string;
  }
}

/**
 * Uses DATABASE_URL when given; otherwise starts a throwaway server for the project's run and
 * returns its teardown (each project — `main`, `chaos` — that runs gets its own server).
 */
export async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const given = process.env['DATABASE_URL'];
  if (given) {
    project.provide('postgresUrl', given);
    return undefined;
  }
  const server: PostgresServer = await startPostgres();
  project.provide('postgresUrl', server.url);
  return () => server.destroy();
}
