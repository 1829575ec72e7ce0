import { randomUUID } from 'node:crypto';
import { found, notFound, type WorkflowRegistration } from 'ledgerflow/runtime';
import { userOnboardingHandlers } from '../../generated/contracts/user-onboarding.v1.js';
import type { EmailGateway } from '../fakes/email-provider.js';
import type { AppDatabase } from '../migrations/app-database.js';
import type { userOnboarding } from './user-onboarding.workflow.js';

/** `user-onboarding` bound to its handlers, ready for a worker. */
export function userOnboardingRegistration(services: {
  readonly email: EmailGateway;
}): WorkflowRegistration<typeof userOnboarding> {
  return userOnboardingHandlers<AppDatabase>({
    async createAccount(ctx) {
      const { input, tx } = ctx;
      // A random id is fine here (unlike in a key): this handler's output is recorded exactly once.
      const inserted = await tx
        .insertInto('shop.customer')
        .values({ id: `cus_${randomUUID()}`, email: input.email, display_name: input.displayName, plan: input.plan })
        .onConflict((oc) => oc.column('email').doNothing())
        .returning('id')
        .executeTakeFirst();
      if (inserted !== undefined) return ctx.record({ customerId: inserted.id, created: true });
      // Someone signed up with this address before (another run): welcome the existing account.
      const existing = await tx
        .selectFrom('shop.customer')
        .select('id')
        .where('email', '=', input.email)
        .executeTakeFirstOrThrow();
      return ctx.record({ customerId: existing.id, created: false });
    },

    sendWelcomeEmail: {
      async perform({ key, input }) {
        const sent = await services.email.send({
          to: input.email,
          subject: `Welcome, ${input.displayName}`,
          body: `Your ${input.plan} account is ready.`,
          reference: key,
        });
        return { messageId: sent.messageId };
      },
      async reconcile({ key }) {
        const [first] = await services.email.findByReference(key);
        return first === undefined ? notFound() : found({ messageId: first.messageId });
      },
    },
  });
}
