import { z } from 'zod';
import { event, shapeHash, workflow, type AnyWorkflow } from 'ledgerflow/dsl';
import { bindHandlers, type WorkflowHandlers, type WorkflowRegistration } from 'ledgerflow/runtime';

/**
 * The workflows module the CLI tests of events, signals, waits and children pass to
 * `--workflows`: a run that skips a step and waits for an event by key, one that sleeps, and a
 * parent that fans out to children which each wait for a signal. Every wait is long: the tests
 * end them by sending, not by time.
 */
export const paymentSettled = event('cli.payment.settled', z.object({ orderId: z.string(), paid: z.boolean() }));
export const approval = event('cli.approval', z.object({ by: z.string().min(1) }));

export const awaitPayment = workflow('cli-await-payment', {
  version: 1,
  input: z.object({ orderId: z.string(), express: z.boolean() }),
})
  .step('expedite', { output: z.object({ lane: z.string() }), when: ({ input }) => input.express })
  .waitFor('settled', { event: paymentSettled, match: ({ input }) => input.orderId, timeoutMs: 3_600_000 })
  .step('outcome', { output: z.object({ status: z.string() }) });

export const napper = workflow('cli-napper', { version: 1, input: z.object({ ms: z.number() }) })
  .sleep('nap', { for: ({ input }) => input.ms })
  .step('after', { output: z.object({ ok: z.boolean() }) });

export const awaitApproval = workflow('cli-await-approval', { version: 1, input: z.object({ approver: z.string() }) })
  .waitFor('approved', { event: approval })
  .step('done', { output: z.object({ by: z.string() }) });

export const approvals = workflow('cli-approvals', {
  version: 1,
  input: z.object({ id: z.string(), approvers: z.array(z.string()) }),
})
  .forEach('approvals', {
    items: ({ input }) => input.approvers,
    key: ({ input, item }) => `cli-approvals:${input.id}:${item}`,
    workflow: awaitApproval,
    input: ({ item }) => ({ approver: item }),
  })
  .step('summary', { output: z.object({ approvedBy: z.array(z.string()) }) });

export const CLI_WAIT_WORKFLOWS: readonly AnyWorkflow[] = [awaitPayment, napper, awaitApproval, approvals];

export const workflows = [
  bind(awaitPayment, {
    expedite: () => ({ lane: 'express' }),
    outcome: ({ steps }) => ({
      status: steps.settled.status === 'received' ? `paid=${String(steps.settled.payload.paid)}` : 'timeout',
    }),
  }),
  bind(napper, { after: () => ({ ok: true }) }),
  bind(awaitApproval, {
    done: ({ steps }) => ({ by: steps.approved.status === 'received' ? steps.approved.payload.by : '(nobody)' }),
  }),
  bind(approvals, { summary: ({ steps }) => ({ approvedBy: steps.approvals.map((a) => a.by) }) }),
];

function bind<W extends AnyWorkflow>(w: W, handlers: WorkflowHandlers<W>): WorkflowRegistration<W> {
  return bindHandlers(w, handlers, shapeHash(w));
}
