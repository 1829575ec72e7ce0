import { queue, workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

export const emailQueue = queue('email', { partition: { concurrency: 2 } });

let region = 'eu';
export function moveTo(next: string): void {
  region = next;
}

export const notify = workflow('notify', { version: 1, input: z.object({ email: z.string() }) }).step('send', {
  output: z.object({ sent: z.boolean() }),
  queue: { queue: emailQueue, partitionKey: ({ input }) => `${region}:${input.email}` },
});
