import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const jobs = workflow('jobs', { version: 1, input: z.object({ jobId: z.string() }) })
  .step('prepare', { output: z.object({}) })
  .transactional('save', { output: z.object({}), key: ({ input }) => `save:${input.jobId}` })
  .transactional('store', { output: z.object({}), key: ({ input }) => `store:${input.jobId}` })
  .transactional('finish', { output: z.object({}), key: ({ input }) => `finish:${input.jobId}` })
  .transactional('flag', { output: z.object({}), key: ({ input }) => `flag:${input.jobId}` })
  .external('publish', { output: z.object({}), key: ({ input }) => `publish:${input.jobId}`, idempotentByKey: true });
