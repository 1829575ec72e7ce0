/**
 * Every example workflow bound to its handlers, for `ledgerflow worker --workflows examples/workflows.ts`
 * (and `reconcile`), and the schedules such a worker registers and ticks. The providers are the
 * in-process fakes, so a worker started this way charges and emails nobody; the demo (`npm start`)
 * hosts them in its own process instead.
 */
import { backfillBatchRegistration, dataBackfillRegistration } from './data-backfill/handlers.js';
import { FakeEmailProvider } from './fakes/email-provider.js';
import { FakePaymentProvider } from './fakes/payment-provider.js';
import { orderPaymentRegistrations } from './order-payment/handlers.js';
import { orderWebhookRegistration } from './order-webhook/handlers.js';
import { revenueReportRegistration } from './revenue-report/handlers.js';
import { nightlyRevenueReport } from './revenue-report/nightly-revenue-report.js';
import { subscriptionRenewalRegistration } from './subscription-renewal/handlers.js';
import { userOnboardingRegistration } from './user-onboarding/handlers.js';

const payments = new FakePaymentProvider();
const email = new FakeEmailProvider();

export const workflows = [
  ...orderPaymentRegistrations({ payments, email }),
  orderWebhookRegistration({ payments }),
  subscriptionRenewalRegistration({ payments }),
  userOnboardingRegistration({ email }),
  backfillBatchRegistration(),
  dataBackfillRegistration(),
  revenueReportRegistration(),
];

export const schedules = [nightlyRevenueReport];
