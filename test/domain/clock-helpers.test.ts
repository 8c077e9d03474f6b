import { describe, expect, it } from 'vitest';
import { retry, sleep, within } from '../../src/domain/clock.ts';
import { ManualClock } from '../helpers/clock.ts';

const turn = () => new Promise<void>((r) => setImmediate(r));

describe('clock helpers', () => {
  it('sleep resolves only when the clock reaches it', async () => {
    const clock = new ManualClock();
    let done = false;
    void sleep(clock, 100).then(() => (done = true));
    clock.advance(99);
    await turn();
    expect(done).toBe(false);
    clock.advance(1);
    await turn();
    expect(done).toBe(true);
  });

  it('within answers done for a settled promise (rejected too) and timeout after ms', async () => {
    const clock = new ManualClock();
    expect(await within(clock, Promise.reject(new Error('x')), 10)).toBe('done');
    const pending = within(clock, new Promise(() => {}), 50);
    clock.advance(50);
    expect(await pending).toBe('timeout');
    expect(clock.pending()).toBe(0);
  });

  it('retry waits the policy delay between attempts and stops after `attempts`', async () => {
    const clock = new ManualClock();
    const seen: number[] = [];
    const r = retry(clock, { delayMs: (n) => n * 10, attempts: 3 }, async (n) => {
      seen.push(n);
      throw new Error(`fail ${n}`);
    });
    const caught = r.catch((e: Error) => e.message);
    await turn();
    clock.advance(10);
    await turn();
    clock.advance(20);
    expect(await caught).toBe('fail 3');
    expect(seen).toEqual([1, 2, 3]);
  });

  it('retry throws at once an error the policy does not call retryable, and retries the others', async () => {
    const clock = new ManualClock();
    const seen: string[] = [];
    const errors = ['timeout', 'timeout', 'refused'];
    const r = retry(clock, { delayMs: () => 10, retryable: (e) => (e as Error).message === 'timeout' }, async (n) => {
      seen.push(errors[n - 1]);
      throw new Error(errors[n - 1]);
    });
    const caught = r.catch((e: Error) => e.message);
    await turn();
    clock.advance(10);
    await turn();
    clock.advance(10);
    expect(await caught).toBe('refused');
    expect(seen).toEqual(['timeout', 'timeout', 'refused']);
  });

  it('retry returns the first success and honours stopped()', async () => {
    const clock = new ManualClock();
    let calls = 0;
    expect(await retry(clock, { delayMs: () => 1 }, async () => ++calls)).toBe(1);
    expect(await retry(clock, { delayMs: () => 1, stopped: () => true }, async () => 'never')).toBeUndefined();
  });
});
