import { saveJob } from '@acme/jobs-db';
import { makeHandler, withConnection } from '@acme/handler-kit';
import { jobsHandlers } from './generated/contracts/jobs.v1.js';

export function fromElsewhere(handlers: any) {
  return jobsHandlers(handlers);
}

export function jobsRegistration(db: any, common: any, stepName: string) {
  let current = db;
  return jobsHandlers<any>({
    ...common,
    [stepName]: async () => ({}),
    prepare: makeHandler(db),
    save: async (ctx: any) => {
      await saveJob(db, ctx.input.jobId);
      return ctx.record({});
    },
    store: async (ctx: any) => {
      await current.insertInto('jobs.job').values({ id: ctx.input.jobId }).execute();
      return ctx.record({});
    },
    finish: async (ctx: any) => {
      await ctx.repositories.forTransaction(ctx.tx).insertInto('jobs.done').values({ id: ctx.input.jobId }).execute();
      return ctx.record({});
    },
    flag: async (ctx: any) => {
      await withConnection(async (connection: any) => connection.query('INSERT INTO jobs.flag (id) VALUES ($1)', [ctx.input.jobId]));
      return ctx.record({});
    },
    publish: { perform: makeHandler(db) },
  });
}
