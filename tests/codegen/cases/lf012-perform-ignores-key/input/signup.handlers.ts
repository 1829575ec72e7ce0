import { found, notFound } from 'ledgerflow/runtime';
import { notify } from 'sales-sdk';
import { signupHandlers } from './generated/contracts/signup.v1.js';

export interface Billing {
  createCustomer(email: string): Promise<{ id: string }>;
}
export interface Mailer {
  send(to: string, options: { reference?: string }): Promise<{ id: string }>;
  findByReference(reference: string): Promise<{ id: string } | undefined>;
}

export function signupRegistration(billing: Billing, mailer: Mailer) {
  return signupHandlers({
    createCustomer: {
      perform: async (ctx) => {
        const customer = await billing.createCustomer(ctx.input.email);
        return { customerId: customer.id };
      },
    },
    sendWelcome: {
      async perform({ key, input }) {
        const sent = await mailer.send(input.email, {});
        return { messageId: sent.id };
      },
      async reconcile({ key }) {
        const first = await mailer.findByReference(key);
        return first === undefined ? notFound() : found({ messageId: first.id });
      },
    },
    // The context goes to a package's function, which may send ctx.key: no warning.
    notifySales: {
      perform: (ctx) => notify(ctx),
    },
  });
}
