import { workflow } from 'ledgerflow/dsl';
import { z } from 'zod';

/**
 * Sign-up: create the account row, then send one welcome email.
 *
 * The welcome key is built from the *account id*, an earlier step's checkpointed output, not
 * from the clock or a fresh UUID: the id is recorded once, so every retry sees the same key.
 */
export const userOnboarding = workflow('user-onboarding', {
  version: 1,
  input: z.object({
    email: z.email().transform((email) => email.toLowerCase()),
    displayName: z.string().min(1).max(100),
    plan: z.enum(['free', 'pro']).default('free'),
  }),
})
  .transactional('createAccount', {
    output: z.object({ customerId: z.string(), created: z.boolean() }),
    key: ({ input }) => `account:${input.email}`,
  })
  .external('sendWelcomeEmail', {
    output: z.object({ messageId: z.string() }),
    key: ({ steps }) => `welcome:${steps.createAccount.customerId}`,
    performTimeoutMs: 2_000,
  });
