import type { KyselyPlugin } from 'kysely';
import type { Store } from 'ledgerflow/runtime';

/** The store, recording the text of every statement its Kysely runs (BEGIN and COMMIT included). */
export function recordingStore(base: Store): { store: Store; statements: string[] } {
  const statements: string[] = [];
  const recorder: KyselyPlugin = {
    transformQuery: ({ node, queryId }) => {
      statements.push(base.db.getExecutor().compileQuery(node, queryId).sql);
      return node;
    },
    transformResult: async ({ result }) => result,
  };
  return { statements, store: { ...base, db: base.db.withPlugin(recorder) } };
}
