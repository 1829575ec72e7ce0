/**
 * The peers `npm run bench:peers` measures ledgerflow against, as the report describes them:
 * how each is driven and what each does where ledgerflow commits the application write in the
 * step's own transaction. Each lives in bench/peers/<folder>/ with its own package.json and
 * lock file (installed there, never a dependency of ledgerflow) and an end-to-end.ts that
 * runs in a child process (bench/peers/peer-job.ts).
 */
export type PeerId = 'dbos' | 'restate' | 'openworkflow';

export interface PeerDescription {
  readonly id: PeerId;
  readonly name: string;
  /** The folder under bench/peers/ and the packages whose installed versions the report names. */
  readonly folder: string;
  readonly packages: readonly string[];
  /** Where the engine keeps its state: the commit and WAL sync counts cover PostgreSQL only. */
  readonly store: string;
  /** How a client starts a workflow and waits for it. */
  readonly driven: string;
  /** The application write: what the engine does instead of committing it with its checkpoint. */
  readonly write: string;
  /** Environment of its child processes, beyond the bench's own. */
  readonly env?: Readonly<Record<string, string>>;
}

export const PEERS: readonly PeerDescription[] = [
  {
    id: 'dbos',
    name: 'DBOS Transact',
    folder: 'dbos',
    packages: ['@dbos-inc/dbos-sdk', 'pg'],
    store: 'PostgreSQL: a system database and the application database, both on the bench server',
    driven:
      '`DBOS.startWorkflow(workflow)(i)`, then `handle.getResult()`; DBOS executes the workflow in the process that starts it ' +
      '(system pool max(10, c + 4) connections). Its data source is bench/peers/dbos/pg-datasource.ts: no published data source ' +
      "package works with SDK 5.3, so it follows DBOS's own Postgres data source statement for statement.",
    write:
      'A data source transaction writes the row and records its outcome (`transaction_completion`) in the application database ' +
      "in the same transaction, so the write itself happens once; the workflow's progress is recorded separately, in the system " +
      'database, and the recorded outcome is looked up before the transaction runs and deleted when the workflow completes — ' +
      'a checkpoint in each database and no commit that covers both.',
  },
  {
    id: 'restate',
    name: 'Restate',
    folder: 'restate',
    packages: ['@restatedev/restate-server', '@restatedev/restate-sdk', '@restatedev/restate-sdk-clients', 'pg'],
    // The SDK logs two lines per invocation at its default level: an application would not measure that.
    env: { RESTATE_LOGGING: 'WARN' },
    store:
      'its own: the Restate server (a child process on free ports, a fresh data directory per measurement, default settings: its ' +
      'log server fsyncs its write-ahead log) keeps the journal and state; PostgreSQL holds only the application rows, so its ' +
      'commit and WAL sync counts are not comparable and are left out',
    driven:
      'the same process serves the workflows (`restate.serve`, HTTP/2) and registers itself with the server; a client calls ' +
      "`workflowSubmit({ i })` on `workflowClient(workflow, uuid)` through the server's ingress, then `workflowAttach()`; the server " +
      'calls the process back to run each invocation.',
    write:
      "A `ctx.run` cannot share the row's transaction: the SDK sends the action's result to the server, which journals it " +
      "in its own log, only after the action returns, so a crash between the row's commit and that journal entry runs the " +
      'action again. The row is therefore keyed by the workflow id (a unique index on it, `INSERT … ON CONFLICT (run_id) DO ' +
      'NOTHING RETURNING id`, reading the existing row on a conflict): written at most once and found again on a retry, at the ' +
      'price of a unique key the application has to have for every such write.',
  },
  {
    id: 'openworkflow',
    name: 'OpenWorkflow',
    folder: 'openworkflow',
    packages: ['openworkflow', 'postgres', 'pg'],
    store: "PostgreSQL: its backend's database on the bench server, the application rows in another",
    driven:
      'the same process runs the worker (`ow.newWorker({ concurrency: c })`, which polls for runs, backing off 50–100 ms after ' +
      'an empty poll and up to 1 s) and the clients: `workflow.run({ i })`, then the run read every 10 ms until it completed ' +
      '(`backend.getWorkflowRun`, the read `handle.result()` makes once a second; these reads count as commits). Backend pool ' +
      '2c + 2 connections.',
    write:
      "A `step.run` cannot share the row's transaction: OpenWorkflow inserts a step attempt before the function runs and marks " +
      'it completed, with its output, in a statement of its own after the function returns, so a crash in between runs the ' +
      'step again. The row is therefore keyed by the run id (a unique index on it, `INSERT … ON CONFLICT (run_id) DO NOTHING ' +
      'RETURNING id`, reading the existing row on a conflict), the same database server but not the same transaction.',
  },
];
