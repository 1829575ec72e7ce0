import { afterEach, describe, expect, it } from 'vitest';
import {
  configureFaults,
  faultCounts,
  faultPoint,
  InjectedFaultError,
  onFaultFired,
  parseFaultLogLine,
  FAULT_LOG_PREFIX,
  type FaultFiring,
  type FaultSpec,
} from 'ledgerflow/testing';
import { configureFaultsFromEnv } from '../../runtime/faults/fault-points.js';

/** Drives a point `n` times and records what happened each time. */
async function drive(n: number): Promise<string[]> {
  const outcomes: string[] = [];
  for (let i = 0; i < n; i += 1) {
    try {
      await faultPoint('after-claim');
      outcomes.push('pass');
    } catch (error) {
      outcomes.push(error instanceof InjectedFaultError ? 'throw' : 'other');
    }
  }
  return outcomes;
}

describe('fault points', () => {
  afterEach(() => configureFaults(undefined));

  it('are inert unless configured: no promise, no firing', () => {
    expect(faultPoint('after-perform')).toBeUndefined();
    expect(faultCounts()).toEqual({});
  });

  it('decide from the seed: the same seed replays the same sequence, another seed differs', async () => {
    const spec: FaultSpec = { seed: 42, points: { 'after-claim': { probability: 0.5, actions: ['throw'] } } };
    configureFaults(spec);
    const first = await drive(40);
    configureFaults(spec);
    const replay = await drive(40);
    configureFaults({ ...spec, seed: 43 });
    const other = await drive(40);
    expect(replay).toEqual(first);
    expect(other).not.toEqual(first);
    expect(first).toContain('throw');
    expect(first).toContain('pass');
  });

  it('name the seed in the injected error and count firings per point', async () => {
    configureFaults({ seed: 7, points: { 'after-claim': { probability: 1, actions: ['throw'], times: 2 } } });
    const heard: FaultFiring[] = [];
    const unsubscribe = onFaultFired((f) => heard.push(f));
    await expect(faultPoint('after-claim')).rejects.toThrow('Injected fault at after-claim (seed 7, firing #1)');
    expect(await drive(3)).toEqual(['throw', 'pass', 'pass']);
    unsubscribe();
    expect(faultCounts()).toEqual({ 'after-claim': 2 });
    expect(heard.map((f) => f.firing)).toEqual([1, 2]);
    expect(faultPoint('after-perform')).toBeUndefined();
  });

  it('hang for hangMs and then continue', async () => {
    configureFaults({ seed: 1, points: { 'before-lease-renewal': { probability: 1, actions: ['hang'], hangMs: 30 } } });
    const started = performance.now();
    await faultPoint('before-lease-renewal');
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
  });

  it('print a parseable line before acting, so a harness can count firings in a child process', () => {
    const firing: FaultFiring = { point: 'after-perform', action: 'kill', seed: 5, firing: 1 };
    expect(parseFaultLogLine(`${FAULT_LOG_PREFIX}${JSON.stringify(firing)}`)).toEqual(firing);
    expect(parseFaultLogLine('something else')).toBeUndefined();
  });

  it('reject a bad spec with what to fix', () => {
    expect(() =>
      configureFaults({
        seed: 1.5,
        points: { 'after-nothing': { probability: 2, actions: ['explode'] } },
      } as unknown as FaultSpec),
    ).toThrow(/seed must be an integer \(got 1.5\); unknown fault point "after-nothing" \(known: after-claim, /);
    expect(() =>
      configureFaults({ seed: 1, points: { 'after-claim': { probability: 2, actions: ['explode' as 'throw'] } } }),
    ).toThrow(
      'Invalid fault spec: after-claim.probability must be in [0, 1]; after-claim.actions: unknown action "explode" (use throw, hang or kill).',
    );
    expect(() => configureFaultsFromEnv({ LEDGERFLOW_FAULTS: '{nope' })).toThrow(
      /^LEDGERFLOW_FAULTS is not valid JSON/,
    );
  });

  it('read LEDGERFLOW_FAULTS', async () => {
    configureFaultsFromEnv({
      LEDGERFLOW_FAULTS: JSON.stringify({ seed: 9, points: { 'after-claim': { probability: 1, actions: ['throw'] } } }),
    });
    await expect(faultPoint('after-claim')).rejects.toThrow('(seed 9, firing #1)');
  });
});
