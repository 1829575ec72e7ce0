import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const digest = workflow('daily-digest', { version: 1, input: z.object({ day: z.string(), userId: z.string() }) })
  .external('send', {
    output: z.object({ messageId: z.string() }),
    key: ({ input }) => `digest:${input.userId}:${new Date(input.day).toISOString().slice(0, 10)}`,
  });
