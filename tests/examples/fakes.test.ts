import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeEmailProvider } from '../../examples/fakes/email-provider.js';
import { HttpEmailGateway, HttpPaymentGateway, startFakeServer } from '../../examples/fakes/fake-server.js';
import type { RunningServer } from '../../examples/fakes/json-http.js';
import {
  FakePaymentProvider,
  IdempotencyConflictError,
  ProviderUnavailableError,
  type ChargeRequest,
} from '../../examples/fakes/payment-provider.js';

const order1: ChargeRequest = { reference: 'order-1', amountCents: 1200, currency: 'eur', customerId: 'cus_1' };

describe('FakePaymentProvider', () => {
  it('returns the first result for a repeated key and charges once', async () => {
    const payments = new FakePaymentProvider();
    const first = await payments.charge(order1, { idempotencyKey: 'charge:order-1' });
    const again = await payments.charge(order1, { idempotencyKey: 'charge:order-1' });
    expect(again).toEqual(first);
    expect(payments.chargesForKey('charge:order-1')).toBe(1);
    expect(payments.totalCharges()).toBe(1);
    expect(payments.stats()).toMatchObject({ requests: 2, replays: 1, totalCharges: 1 });
  });

  it('refuses a different request under a used key and charges nothing more', async () => {
    const payments = new FakePaymentProvider();
    await payments.charge(order1, { idempotencyKey: 'k' });
    await expect(payments.charge({ ...order1, amountCents: 1300 }, { idempotencyKey: 'k' })).rejects.toThrow(
      IdempotencyConflictError,
    );
    expect(payments.totalCharges()).toBe(1);
    expect(payments.stats().conflicts).toBe(1);
  });

  it('charges every time without a key', async () => {
    const payments = new FakePaymentProvider();
    await payments.charge(order1);
    await payments.charge(order1);
    expect(payments.chargesForReference('order-1')).toBe(2);
    expect(payments.stats().chargesByKey).toEqual({});
    expect(payments.stats().chargesByReference).toEqual({ 'order-1': 2 });
  });

  it('injects failures before and after applying', async () => {
    const payments = new FakePaymentProvider();
    payments.failNext(1, 'before-apply');
    payments.failNext(1, 'after-apply');
    await expect(payments.charge(order1, { idempotencyKey: 'a' })).rejects.toThrow(ProviderUnavailableError);
    expect(payments.totalCharges()).toBe(0);
    await expect(payments.charge(order1, { idempotencyKey: 'a' })).rejects.toThrow(/charge was applied/);
    expect(payments.totalCharges()).toBe(1);
    // The caller does not know; a same-key retry finds the applied charge instead of charging again.
    expect((await payments.charge(order1, { idempotencyKey: 'a' })).id).toBe(payments.charges()[0]?.id);
    expect(await payments.findCharge('a')).toEqual(payments.charges()[0]);
    expect(payments.totalCharges()).toBe(1);
  });

  it('refunds what was charged for a reference once per key, and only once per charge', async () => {
    const payments = new FakePaymentProvider();
    expect(await payments.refund('order-1', { idempotencyKey: 'refund:nothing' })).toMatchObject({
      amountCents: 0,
      chargeIds: [],
    });
    const charge = await payments.charge(order1, { idempotencyKey: 'charge:order-1' });
    const first = await payments.refund('order-1', { idempotencyKey: 'refund:order-1' });
    expect(first).toMatchObject({ reference: 'order-1', amountCents: 1200, chargeIds: [charge.id] });
    // The same key again (a retry after a crash) returns the first refund.
    expect(await payments.refund('order-1', { idempotencyKey: 'refund:order-1' })).toEqual(first);
    // Another key finds nothing left to give back.
    expect(await payments.refund('order-1', { idempotencyKey: 'refund:again' })).toMatchObject({ amountCents: 0 });
    await expect(payments.refund('order-2', { idempotencyKey: 'refund:order-1' })).rejects.toThrow(
      IdempotencyConflictError,
    );
    expect(payments.refundsForReference('order-1').map((r) => r.amountCents)).toEqual([0, 1200, 0]);
  });

  it('rejects malformed requests with a message naming the field', async () => {
    const payments = new FakePaymentProvider();
    await expect(payments.charge({ ...order1, amountCents: -5 })).rejects.toThrow(
      /amountCents must be a positive integer/,
    );
    expect(payments.stats().requests).toBe(0);
  });
});

describe('FakeEmailProvider', () => {
  it('does not dedupe, but finds messages by reference', async () => {
    const email = new FakeEmailProvider();
    const message = { to: 'ada@example.com', subject: 'Receipt', body: 'Thanks', reference: 'receipt:order-1' };
    await email.send(message);
    await email.send(message);
    expect(email.sentForReference('receipt:order-1')).toBe(2);
    expect((await email.findByReference('receipt:order-1')).map((m) => m.messageId)).toEqual([
      'msg_000001',
      'msg_000002',
    ]);
    expect(await email.findByReference('receipt:order-2')).toEqual([]);
    expect(email.stats()).toEqual({
      totalSent: 2,
      lookups: 2,
      sentByReference: { 'receipt:order-1': 2 },
      pending: 0,
      lateApplied: 0,
    });
  });

  it('applies late: a sender that gave up has still sent the message, and a lookup meanwhile finds nothing', async () => {
    const delays = [120, 0];
    const email = new FakeEmailProvider({ applyDelayMs: () => delays.shift() ?? 0 });
    const message = { to: 'ada@example.com', subject: 'Receipt', body: 'Thanks', reference: 'receipt:order-1' };
    const gaveUp = await email.send(message, { signal: AbortSignal.timeout(30) }).catch((error: unknown) => error);
    expect((gaveUp as Error).name).toBe('TimeoutError');
    expect(email.pendingApplications()).toBe(1);
    expect(await email.findByReference('receipt:order-1')).toEqual([]);
    expect(email.sentForReference('receipt:order-1')).toBe(0);
    await email.whenIdle(1_000);
    expect(email.sentForReference('receipt:order-1')).toBe(1);
    expect(email.stats()).toMatchObject({ totalSent: 1, pending: 0, lateApplied: 1 });
    // A sender still waiting gets its answer after the application, and it is not late.
    const sent = await email.send(message, { signal: AbortSignal.timeout(1_000) });
    expect(sent.sequence).toBe(2);
    expect(email.stats()).toMatchObject({ totalSent: 2, lateApplied: 1 });
  });

  it('refuses a send whose signal already aborted, applying nothing', async () => {
    const email = new FakeEmailProvider();
    const controller = new AbortController();
    controller.abort(new Error('gave up before sending'));
    await expect(
      email.send(
        { to: 'ada@example.com', subject: 'Receipt', body: 'x', reference: 'r' },
        { signal: controller.signal },
      ),
    ).rejects.toThrow('gave up before sending');
    await email.whenIdle(100);
    expect(email.totalSent()).toBe(0);
  });
});

describe('fake server over HTTP', () => {
  let server: RunningServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('keeps the counters in the serving process and maps provider errors back', async () => {
    const payments = new FakePaymentProvider();
    const email = new FakeEmailProvider();
    server = await startFakeServer({ payments, email });
    const gateway = new HttpPaymentGateway(server.url);
    const first = await gateway.charge(order1, { idempotencyKey: 'charge:order-1' });
    expect(await gateway.charge(order1, { idempotencyKey: 'charge:order-1' })).toEqual(first);
    await expect(gateway.charge({ ...order1, currency: 'usd' }, { idempotencyKey: 'charge:order-1' })).rejects.toThrow(
      IdempotencyConflictError,
    );
    await expect(gateway.charge({ ...order1, currency: 'EUR' })).rejects.toThrow(TypeError);
    payments.failNext(1, 'before-apply');
    await expect(gateway.charge(order1, { idempotencyKey: 'other' })).rejects.toThrow(ProviderUnavailableError);
    expect(await gateway.findCharge('charge:order-1')).toEqual(first);
    expect(await gateway.findCharge('nope')).toBeUndefined();
    expect(payments.chargesForKey('charge:order-1')).toBe(1);
    expect((await gateway.stats()).totalCharges).toBe(1);
    // Refunds over HTTP: deduped by key like charges; a key reused for another reference is refused.
    const refund = await gateway.refund(order1.reference, { idempotencyKey: 'refund:order-1' });
    expect(refund).toMatchObject({
      reference: order1.reference,
      amountCents: first.amountCents,
      chargeIds: [first.id],
    });
    expect(await gateway.refund(order1.reference, { idempotencyKey: 'refund:order-1' })).toEqual(refund);
    await expect(gateway.refund('order-2', { idempotencyKey: 'refund:order-1' })).rejects.toThrow(
      IdempotencyConflictError,
    );
    expect(payments.refundsForReference(order1.reference)).toEqual([refund]);

    const mail = new HttpEmailGateway(server.url);
    await mail.send({ to: 'ada@example.com', subject: 'Receipt', body: 'x', reference: 'r1' });
    expect((await mail.findByReference('r1')).length).toBe(1);
    expect(email.sentForReference('r1')).toBe(1);
    expect((await mail.stats()).totalSent).toBe(1);
  });

  it('applies a message whose HTTP client timed out, after the client gave up', async () => {
    const email = new FakeEmailProvider({ applyDelayMs: 150 });
    server = await startFakeServer({ email });
    const mail = new HttpEmailGateway(server.url);
    const message = { to: 'ada@example.com', subject: 'Receipt', body: 'x', reference: 'receipt:late' };
    const gaveUp = await mail.send(message, { signal: AbortSignal.timeout(40) }).catch((error: unknown) => error);
    expect((gaveUp as Error).name).toBe('TimeoutError');
    // The client's lookup right after giving up: not applied yet.
    expect(await mail.findByReference('receipt:late')).toEqual([]);
    await email.whenIdle(2_000);
    expect((await mail.findByReference('receipt:late')).length).toBe(1);
    expect(await mail.stats()).toMatchObject({ totalSent: 1, pending: 0, lateApplied: 1 });
  });

  it('counts charges made by another process', async () => {
    const payments = new FakePaymentProvider();
    server = await startFakeServer({ payments });
    const script = `
      import { HttpPaymentGateway } from './examples/fakes/fake-server.ts';
      const g = new HttpPaymentGateway(process.argv[1]);
      const req = { reference: 'order-9', amountCents: 500, currency: 'eur', customerId: 'c' };
      await g.charge(req, { idempotencyKey: 'charge:order-9' });
      await g.charge(req, { idempotencyKey: 'charge:order-9' });
      await g.charge(req);
    `;
    await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, server.url], {
      cwd: new URL('../..', import.meta.url).pathname,
    });
    expect(payments.chargesForKey('charge:order-9')).toBe(1);
    expect(payments.chargesForReference('order-9')).toBe(2);
  });
});
