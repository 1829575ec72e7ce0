import type pg from 'pg';

/** node-postgres's `Client.prototype.query`, as the store's client classes wrap it. */
export type QueryMethod = (this: pg.Client, config: unknown, values?: unknown, callback?: unknown) => unknown;

/** A subclass of `Base` whose `query` is `wrap(query of Base)`; everything else is Base's. */
export function overrideQuery(Base: typeof pg.Client, wrap: (query: QueryMethod) => QueryMethod): typeof pg.Client {
  class WrappedClient extends Base {}
  WrappedClient.prototype.query = wrap(Base.prototype.query as QueryMethod) as typeof Base.prototype.query;
  return WrappedClient;
}
