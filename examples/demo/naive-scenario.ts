import { FakeEmailProvider } from '../fakes/email-provider.js';
import { startFakeServer } from '../fakes/fake-server.js';
import { FakePaymentProvider } from '../fakes/payment-provider.js';
import { jsonLines, runScript } from './child-process.js';
import type { DemoOrder } from './demo-orders.js';
import { NaiveQueue, queueRoutes, type NaiveCrash } from './naive-queue.js';

export interface NaiveResult {
  readonly crashes: readonly NaiveCrash[];
  readonly acked: number;
  readonly redeliveries: number;
  readonly chargesPerOrder: Readonly<Record<string, number>>;
  readonly receiptsPerOrder: Readonly<Record<string, number>>;
}

/**
 * The same orders and the same crashes, handled by a queue consumer without a ledger
 * (`naive-worker.ts`), against fresh providers with their own counters.
 */
export async function runNaiveScenario(options: {
  readonly orders: readonly DemoOrder[];
  readonly crashes: readonly NaiveCrash[];
  readonly log: (line: string) => void;
}): Promise<NaiveResult> {
  const payments = new FakePaymentProvider();
  const email = new FakeEmailProvider();
  const queue = new NaiveQueue<DemoOrder>();
  for (const order of options.orders) queue.enqueue(order);
  const server = await startFakeServer({ payments, email }, [queueRoutes(queue)]);
  try {
    let remaining = [...options.crashes];
    const happened: NaiveCrash[] = [];
    for (let round = 1; round <= options.crashes.length + 1; round += 1) {
      const result = await runScript(
        './naive-worker.ts',
        { DEMO_SERVICES_URL: server.url, DEMO_NAIVE_CRASHES: JSON.stringify(remaining) },
        60_000,
      );
      if (result.signal === 'SIGKILL') {
        const crashed = jsonLines(result.stdout).flatMap((line) =>
          typeof line === 'object' && line !== null && 'crashed' in line
            ? [(line as { crashed: NaiveCrash }).crashed]
            : [],
        )[0];
        if (crashed === undefined)
          throw new Error(`naive worker ${round} died without naming its crash:\n${result.stderr}`);
        happened.push(crashed);
        remaining = remaining.filter((c) => !(c.orderId === crashed.orderId && c.step === crashed.step));
        options.log(
          `naive worker ${round} was killed right after ${crashed.step} returned for order ${crashed.orderId}`,
        );
        continue;
      }
      if (result.code !== 0)
        throw new Error(`naive worker ${round} exited with ${result.code}:\n${result.stderr.slice(-4000)}`);
      options.log(`naive worker ${round} emptied the queue and exited`);
      break;
    }
    const orderIds = options.orders.map((o) => o.orderId);
    return {
      crashes: happened,
      acked: options.orders.length - queue.unacked(),
      redeliveries: queue.redeliveries(),
      chargesPerOrder: Object.fromEntries(orderIds.map((id) => [id, payments.chargesForReference(id)])),
      receiptsPerOrder: Object.fromEntries(orderIds.map((id) => [id, email.sentForReference(`receipt:${id}`)])),
    };
  } finally {
    await server.close();
  }
}
