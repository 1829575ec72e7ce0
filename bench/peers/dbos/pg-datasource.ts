import { AsyncLocalStorage } from 'node:async_hooks';
import { DBOS } from '@dbos-inc/dbos-sdk';
import {
  assertStillOwnsWorkflow,
  DBOSError,
  DBOSStepAlreadyRecordedError,
  DBOSWorkflowConflictError,
  isPGRetriableTransactionError,
  migrateDataSourcePG,
  registerDataSource,
  registerTransaction,
  replayRecordedStep,
  type DataSourceTransactionHandler,
} from '@dbos-inc/dbos-sdk/datasource';
import pg from 'pg';
import { SuperJSON } from 'superjson';

/**
 * A DBOS Transact data source on node-postgres, through the SDK's public data source interface
 * (`@dbos-inc/dbos-sdk/datasource`). No published data source package pairs with SDK 5.3:
 * `@dbos-inc/postgres-datasource` 4.24.16 and `@dbos-inc/knex-datasource` 4.5.13 call
 * `checkSchemaInstallationPG`, which 5.3 no longer exports, and fail at launch. This one
 * follows the 5.3 contract as DBOS's own Postgres data source does, statement for statement:
 * look up the step's checkpoint; BEGIN; the user's function; insert the checkpoint (a conflict
 * replays the recorded outcome); check the workflow is still owned; COMMIT; and on the
 * workflow's completion, delete its checkpoints.
 */
const SCHEMA = 'dbos';
const current = new AsyncLocalStorage<pg.PoolClient>();

class PgTransactionHandler implements DataSourceTransactionHandler {
  #pool: pg.Pool | undefined;

  constructor(
    readonly name: string,
    private readonly config: pg.PoolConfig,
  ) {}

  async initialize(): Promise<void> {
    this.#pool = new pg.Pool(this.config);
    this.#pool.on('error', () => {});
    await this.#inTransaction(async (client) => {
      await migrateDataSourcePG(async (sql) => (await client.query(sql)).rows, SCHEMA);
    });
  }

  async destroy(): Promise<void> {
    const pool = this.#pool;
    this.#pool = undefined;
    await pool?.end();
  }

  async deleteCheckpoints(workflowID: string, startStep: number, beforeCommit?: () => Promise<void>): Promise<void> {
    await this.#inTransaction(async (client) => {
      await client.query(`DELETE FROM ${SCHEMA}.transaction_completion WHERE workflow_id = $1 AND function_num >= $2`, [
        workflowID,
        startStep,
      ]);
      await beforeCommit?.();
    });
  }

  async invokeTransactionFunction<This, Args extends unknown[], Return>(
    _config: unknown,
    target: This,
    func: (this: This, ...args: Args) => Promise<Return>,
    ...args: Args
  ): Promise<Return> {
    const workflowID = DBOS.workflowID;
    const stepID = DBOS.stepID;
    if (workflowID !== undefined && stepID === undefined)
      throw new Error('DBOS.stepID is undefined inside a workflow.');
    const checkpoint = workflowID === undefined ? undefined : { workflowID, stepID: stepID! };
    for (let retryWaitMs = 1; ; retryWaitMs = Math.min(retryWaitMs * 1.5, 2000)) {
      const recorded = checkpoint && (await this.#recorded(checkpoint.workflowID, checkpoint.stepID));
      if (recorded) return replayRecordedStep<Return>(recorded);
      try {
        return await this.#inTransaction(async (client) => {
          const result = await current.run(client, () => func.call(target, ...args));
          if (checkpoint) {
            const { rowCount } = await client.query(
              `INSERT INTO ${SCHEMA}.transaction_completion (workflow_id, function_num, output) VALUES ($1, $2, $3)
               ON CONFLICT (workflow_id, function_num) DO NOTHING`,
              [checkpoint.workflowID, checkpoint.stepID, SuperJSON.stringify(result)],
            );
            if (rowCount === 0) throw new DBOSStepAlreadyRecordedError(checkpoint.workflowID, checkpoint.stepID);
            await assertStillOwnsWorkflow(checkpoint.workflowID);
          }
          return result;
        });
      } catch (error) {
        if (checkpoint && error instanceof DBOSStepAlreadyRecordedError)
          return this.#replayConflict<Return>(checkpoint.workflowID, checkpoint.stepID);
        if (error instanceof DBOSWorkflowConflictError) throw error;
        if (isPGRetriableTransactionError(error)) {
          await new Promise((resolve) => setTimeout(resolve, retryWaitMs));
          continue;
        }
        if (checkpoint) {
          const { rowCount } = await this.#db.query(
            `INSERT INTO ${SCHEMA}.transaction_completion (workflow_id, function_num, error) VALUES ($1, $2, $3)
             ON CONFLICT (workflow_id, function_num) DO NOTHING`,
            [checkpoint.workflowID, checkpoint.stepID, SuperJSON.stringify(error)],
          );
          if (rowCount === 0) return this.#replayConflict<Return>(checkpoint.workflowID, checkpoint.stepID);
        }
        throw error;
      }
    }
  }

  get #db(): pg.Pool {
    if (!this.#pool) throw new Error(`Data source ${this.name} is not initialized.`);
    return this.#pool;
  }

  async #recorded(
    workflowID: string,
    stepID: number,
  ): Promise<{ output: string | null; error: string | null } | undefined> {
    const { rows } = await this.#db.query<{ output: string | null; error: string | null }>(
      `SELECT output, error FROM ${SCHEMA}.transaction_completion WHERE workflow_id = $1 AND function_num = $2`,
      [workflowID, stepID],
    );
    return rows[0];
  }

  async #replayConflict<Return>(workflowID: string, stepID: number): Promise<Return> {
    const recorded = await this.#recorded(workflowID, stepID);
    if (!recorded)
      throw new DBOSError(
        `Step ${stepID} of workflow ${workflowID} conflicted with a concurrent execution, but no recorded outcome was found`,
      );
    return replayRecordedStep<Return>(recorded);
  }

  async #inTransaction<T>(body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.#db.connect();
    try {
      await client.query('BEGIN');
      const result = await body(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }
}

/** Registers the data source with DBOS (before `DBOS.launch`); its transactions reach their connection through `client()`. */
export class PgDataSource {
  constructor(
    readonly name: string,
    config: pg.PoolConfig,
  ) {
    registerDataSource(new PgTransactionHandler(name, config));
  }

  registerTransaction<Args extends unknown[], Return>(
    func: (...args: Args) => Promise<Return>,
    name: string,
  ): (...args: Args) => Promise<Return> {
    return registerTransaction(this.name, func, { name });
  }

  /** The connection of the transaction this code runs in. */
  static client(): pg.PoolClient {
    const client = current.getStore();
    if (!client) throw new Error('PgDataSource.client() called outside a DBOS transaction.');
    return client;
  }
}
