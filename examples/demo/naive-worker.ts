/**
 * The contrast worker (a child process): order handling written the way a queue consumer
 * usually is — receive, charge, email, ack — with no ledger. It charges without an idempotency
 * key and emails without a lookup, because nothing tells it what a previous delivery did.
 *
 * Crash points come from the parent as `DEMO_NAIVE_CRASHES` (JSON `[{ orderId, step }]`): the
 * same (order, step) pairs at which the ledgerflow workers were killed, so both sides face the
 * same crashes. The process SIGKILLs itself right after that call returned, before the ack.
 */
import { writeSync } from 'node:fs';
import type { WorkflowInput } from 'ledgerflow/dsl';
import { HttpEmailGateway, HttpPaymentGateway } from '../fakes/fake-server.js';
import type { orderPayment } from '../order-payment/order-payment.workflow.js';
import { HttpNaiveQueue, NAIVE_VISIBILITY_MS, type NaiveCrash } from './naive-queue.js';

type Order = WorkflowInput<typeof orderPayment>;

const url = requireEnv('DEMO_SERVICES_URL');
const crashes = JSON.parse(process.env['DEMO_NAIVE_CRASHES'] ?? '[]') as NaiveCrash[];
const queue = new HttpNaiveQueue<Order>(url);
const payments = new HttpPaymentGateway(url);
const email = new HttpEmailGateway(url);

function crashIfPlanned(orderId: string, step: NaiveCrash['step']): void {
  if (crashes.some((c) => c.orderId === orderId && c.step === step)) {
    // Synchronous write: the parent reads this line to learn which crash happened.
    writeSync(1, `${JSON.stringify({ crashed: { orderId, step } })}\n`);
    process.kill(process.pid, 'SIGKILL');
  }
}

for (;;) {
  const { message, unacked } = await queue.receive(NAIVE_VISIBILITY_MS);
  if (message === null) {
    if (unacked === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
    continue;
  }
  const order = message.body;
  const amountCents = order.lines.reduce((sum, line) => sum + line.quantity * line.unitPriceCents, 0);
  const charge = await payments.charge({
    reference: order.orderId,
    amountCents,
    currency: order.currency,
    customerId: order.customerId,
  });
  crashIfPlanned(order.orderId, 'chargeCard');
  await email.send({
    to: order.email,
    subject: `Receipt for order ${order.orderId}`,
    body: `We charged ${(charge.amountCents / 100).toFixed(2)} ${order.currency.toUpperCase()} (${charge.id}).`,
    reference: `receipt:${order.orderId}`,
  });
  crashIfPlanned(order.orderId, 'sendReceipt');
  await queue.ack(message.id);
}

function requireEnv(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '')
    throw new Error(`${name} is not set; this script is started by examples/demo/main.ts.`);
  return value;
}
