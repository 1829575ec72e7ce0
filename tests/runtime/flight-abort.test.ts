import { describe, expect, it } from 'vitest';
import { LeaseLostError } from '../../runtime/errors.js';
import { FlightAbort } from '../../runtime/worker/flight.js';

/*
 * A flight's abort (runtime/worker/flight.ts) stands in for an AbortController on the worker's
 * hot path: it must behave as one does for everything the worker and a handler read.
 */
describe('FlightAbort', () => {
  it('aborts once, with the first reason, and runs each listener once, in the abort call', () => {
    const abort = new FlightAbort();
    const heard: string[] = [];
    abort.addEventListener('abort', () => heard.push('a'), { once: true });
    abort.addEventListener('abort', () => heard.push('b'));
    expect(abort.aborted).toBe(false);
    const first = new LeaseLostError('lease lost');
    abort.abort(first);
    expect(heard).toEqual(['a', 'b']);
    abort.abort(new LeaseLostError('again'));
    expect(heard).toEqual(['a', 'b']);
    expect(abort.aborted).toBe(true);
    expect(abort.reason).toBe(first);
  });

  it('does not run a listener that was removed, or one added after the abort (as an AbortSignal does not)', () => {
    const abort = new FlightAbort();
    const heard: string[] = [];
    const removed = (): void => void heard.push('removed');
    abort.addEventListener('abort', removed);
    abort.removeEventListener('abort', removed);
    abort.abort('stop');
    abort.addEventListener('abort', () => heard.push('late'));
    expect(heard).toEqual([]);
  });

  it('gives handlers a real AbortSignal, made on first read: aborted with it, or already aborted with its reason', () => {
    const before = new FlightAbort();
    const signal = before.signal;
    expect(signal).toBeInstanceOf(AbortSignal);
    expect(before.signal).toBe(signal);
    let fired = 0;
    signal.addEventListener('abort', () => fired++);
    before.abort('lease lost');
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe('lease lost');
    expect(fired).toBe(1);

    const after = new FlightAbort();
    after.abort('worker stopping');
    expect(after.signal.aborted).toBe(true);
    expect(after.signal.reason).toBe('worker stopping');
  });
});
