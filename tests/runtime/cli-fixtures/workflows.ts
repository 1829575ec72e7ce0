import { z } from 'zod';
import { shapeHash, workflow } from 'ledgerflow/dsl';
import { bindHandlers, unknownOutcome } from 'ledgerflow/runtime';

/**
 * The workflows module the CLI tests pass to `--workflows`: a plain step that can be made slow
 * (to catch a worker mid-step with SIGTERM) and an external step whose reconcile never knows
 * (to see `reconcile` park a run).
 */
export const greet = workflow('cli-greet', {
  version: 1,
  input: z.object({ name: z.string().min(1), slowMs: z.number().int().nonnegative().default(0) }),
})
  .step('greet', { output: z.object({ text: z.string() }) })
  .external('deliver', {
    output: z.object({ deliveryId: z.string() }),
    key: ({ input }) => `deliver:${input.name}`,
    performTimeoutMs: 100,
  });

export const workflows = [
  bindHandlers(
    greet,
    {
      greet: async ({ input }) => {
        if (input.slowMs > 0) await new Promise((r) => setTimeout(r, input.slowMs));
        return { text: `hello ${input.name}` };
      },
      deliver: {
        perform: async ({ key }) => ({ deliveryId: key }),
        reconcile: async () => unknownOutcome('the CLI test provider keeps no records'),
      },
    },
    shapeHash(greet),
  ),
];
