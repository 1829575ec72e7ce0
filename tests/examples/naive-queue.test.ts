import { describe, expect, it } from 'vitest';
import { NaiveQueue } from '../../examples/demo/naive-queue.js';

describe('NaiveQueue (the demo contrast)', () => {
  it('redelivers a message whose consumer never acked it, once the visibility timeout passes', async () => {
    const queue = new NaiveQueue<{ orderId: string }>();
    queue.enqueue({ orderId: 'o1' });
    const first = queue.receive(20);
    expect(first).toMatchObject({ body: { orderId: 'o1' }, deliveries: 1 });
    expect(queue.receive(20)).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 30));
    const again = queue.receive(20);
    expect(again).toMatchObject({ id: first?.id, deliveries: 2 });
    queue.ack(again!.id);
    expect(queue.unacked()).toBe(0);
    expect(queue.redeliveries()).toBe(1);
  });
});
