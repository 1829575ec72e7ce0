import type {} from 'vitest';
import type { TestProject } from 'vitest/node';
import { startPostgres, type PostgresServer } from './postgres-server.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Superuser URL of the PostgreSQL server under test (from DATABASE_URL or started here). */
    postgresUrl: string;
  }
}

let server: PostgresServer | undefined;

/** Uses DATABASE_URL when given; otherwise starts a throwaway server for the whole run. */
export async function setup(project: TestProject): Promise<void> {
  const given = process.env['DATABASE_URL'];
  if (given) {
    project.provide('postgresUrl', given);
    return;
  }
  server = await startPostgres();
  project.provide('postgresUrl', server.url);
}

export async function teardown(): Promise<void> {
  await server?.destroy();
}
