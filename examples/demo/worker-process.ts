/**
 * One worker process of the demo, started by `main.ts` as a real child process. It runs the
 * order workflow until nothing is left to do, then exits 0 — unless the fault point it was
 * configured with (through `LEDGERFLOW_FAULTS`, read by the runtime itself) SIGKILLs it first.
 *
 * The payment and email providers live in the parent process and are reached over HTTP, so
 * their counters survive this process being killed at any instruction.
 */
import { writeSync } from 'node:fs';
import { createWorker, openStore } from 'ledgerflow/runtime';
import type { EmailGateway } from '../fakes/email-provider.js';
import { HttpEmailGateway, HttpPaymentGateway } from '../fakes/fake-server.js';
import type { PaymentGateway, RefundGateway } from '../fakes/payment-provider.js';
import { orderPaymentRegistrations } from '../order-payment/handlers.js';
import { DEMO_WORKER_SETTINGS } from './demo-settings.js';

const servicesUrl = requireEnv('DEMO_SERVICES_URL');
const workerId = requireEnv('DEMO_WORKER_ID');
const concurrency = Number(process.env['DEMO_CONCURRENCY'] ?? '4');

/**
 * Tells the parent, synchronously (before the runtime sees the result, so before any fault
 * point after it), which provider call just returned: with concurrency 1 the last such line
 * before a SIGKILL names the crash point.
 */
function announce(step: 'chargeCard' | 'sendReceipt', orderId: string): void {
  writeSync(1, `${JSON.stringify({ performed: { step, orderId } })}\n`);
}

const remotePayments = new HttpPaymentGateway(servicesUrl);
const payments: PaymentGateway & RefundGateway = {
  async charge(request, options) {
    const charge = await remotePayments.charge(request, options);
    announce('chargeCard', request.reference);
    return charge;
  },
  findCharge: (key) => remotePayments.findCharge(key),
  refund: (reference, options) => remotePayments.refund(reference, options),
};
const remoteEmail = new HttpEmailGateway(servicesUrl);
const email: EmailGateway = {
  async send(message) {
    const sent = await remoteEmail.send(message);
    announce('sendReceipt', message.reference.replace(/^receipt:/, ''));
    return sent;
  },
  findByReference: (reference) => remoteEmail.findByReference(reference),
};

const store = await openStore({ dataDir: requireEnv('DEMO_DATA_DIR') });
const worker = createWorker({
  store,
  workflows: orderPaymentRegistrations({ payments, email }),
  workerId,
  concurrency,
  ...DEMO_WORKER_SETTINGS,
  onEvent(event) {
    if (event.type === 'error') process.stderr.write(`worker ${workerId}: ${event.where}: ${event.error.message}\n`);
  },
});
await worker.drain({ timeoutMs: 45_000 });
await worker.stop();
await store.close();

function requireEnv(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '')
    throw new Error(`${name} is not set; this script is started by examples/demo/main.ts.`);
  return value;
}
