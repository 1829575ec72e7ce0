import {
  RawNode,
  type KyselyPlugin,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type UnknownRow,
} from 'kysely';
import type { Store } from '../store/store.js';

/** What a statement of a worker that "died" in process meets instead of the database. */
export class WorkerCrashedError extends Error {
  override readonly name = 'WorkerCrashedError';
}

/**
 * A worker's view of the test store that can be cut off at once, as a process killed with
 * SIGKILL is: after {@link CrashableStore.crash}, every statement it sends fails before it reaches
 * the database — its commits, lease renewals, releases, claims — so nothing of its flight after the
 * crash is written, its leases stay held until they expire, and its intents stay open. ROLLBACK
 * still goes through: PostgreSQL rolls back a dead session's transaction, and the one embedded
 * session must not be left inside it.
 */
export interface CrashableStore {
  readonly store: Store;
  readonly crashed: boolean;
  crash(reason: string): void;
}

export function crashableStore(store: Store): CrashableStore {
  let reason: string | undefined;
  const plugin: KyselyPlugin = {
    transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
      if (reason !== undefined && !isRollback(node))
        throw new WorkerCrashedError(`This worker crashed (${reason}); nothing it sends reaches the database.`);
      return node;
    },
    async transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
      return result;
    },
  };
  return {
    store: { ...store, db: store.db.withPlugin(plugin) },
    get crashed() {
      return reason !== undefined;
    },
    crash(why) {
      reason ??= why;
    },
  };
}

function isRollback(node: RootOperationNode): boolean {
  return node.kind === 'RawNode' && rawText(node).trim().toUpperCase() === 'ROLLBACK';
}

/** The text of a raw statement, nested `sql.raw` parts included (``sql`${sql.raw('ROLLBACK')}` ``). */
function rawText(node: RawNode): string {
  return node.sqlFragments
    .map((fragment, i) => {
      const parameter = node.parameters[i];
      return (
        fragment +
        (parameter !== undefined && RawNode.is(parameter) ? rawText(parameter) : parameter === undefined ? '' : '?')
      );
    })
    .join('');
}
