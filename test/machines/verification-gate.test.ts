// The verification gate machine (machines/verification-gate.ts): pure, time given in its events (read
// from a ManualClock that the test moves); readAnswer (src/domain/verification.ts): how an HTTP
// answer reads.
import { describe, expect, it } from 'vitest';
import {
  advanceVerification,
  initialVerification,
  nextWakeOf,
  type VerifyEmit,
  type VerifyEvent,
  type VerifySnapshot,
} from '../../machines/verification-gate.ts';
import { readAnswer, shownUrl } from '../../src/domain/verification.ts';
import { ManualClock } from '../helpers/clock.ts';

const check = (o: Partial<{ interval_ms: number; max_wait_ms: number; failure_limit: number }> = {}) => ({
  shown: 'https://verify.example/check',
  interval_ms: o.interval_ms ?? 30_000,
  max_wait_ms: o.max_wait_ms ?? 3_600_000,
  failure_limit: o.failure_limit ?? 3,
});
const pass = { verdict: 'pass', status: 200, error: null, reason: null } as const;
const pending = { verdict: 'pending', status: 202, error: null, reason: null } as const;
const error = (status: number | null, e: string) => ({ verdict: 'error', status, error: e, reason: null }) as const;

/** A gate over these checks, started now, and a way to feed it events at the clock's now. */
function gate(checks: ReturnType<typeof check>[]) {
  const clock = new ManualClock();
  let s: VerifySnapshot = initialVerification({ checks, at: clock.now() });
  const emitted: VerifyEmit[] = [];
  const feed = (e: Omit<VerifyEvent, 'at'> & { busy?: number[] }) => {
    const r = advanceVerification(s.state, s.context, { ...e, at: clock.now() } as VerifyEvent);
    s = { state: r.state, context: r.context };
    emitted.push(...r.emitted);
    return r;
  };
  return {
    clock,
    get s() {
      return s;
    },
    emitted,
    tick: (busy?: number[]) => feed({ type: 'tick', ...(busy ? { busy } : {}) } as never),
    answer: (index: number, answer: Extract<VerifyEvent, { type: 'answer' }>['answer']) => feed({ type: 'answer', index, answer } as never),
  };
}

describe('verification machine', () => {
  it('asks every URL at once, then each again one interval after its answer; pending, pending, pass passes after exactly 3 asks', () => {
    const g = gate([check()]);
    expect(g.tick().emitted).toEqual([{ type: 'ask', asks: [{ index: 0, attempt: 1 }] }]);
    g.answer(0, pending);
    g.clock.advance(29_999);
    expect(g.tick().changed).toBe(false); // not due yet
    g.clock.advance(1);
    expect(g.tick().emitted).toEqual([{ type: 'ask', asks: [{ index: 0, attempt: 2 }] }]);
    g.answer(0, { verdict: 'pending', status: 200, error: null, reason: null });
    g.clock.advance(30_000);
    expect(g.tick().emitted).toEqual([{ type: 'ask', asks: [{ index: 0, attempt: 3 }] }]);
    const r = g.answer(0, pass);
    expect(r.state).toBe('passed');
    expect(r.emitted).toEqual([{ type: 'passed' }]);
    expect(g.s.context.checks[0]).toMatchObject({
      attempt: 3,
      passed: true,
      last: { verdict: 'pass', status: 200, at: new Date(g.clock.now()).toISOString() },
    });
    // a passed gate accepts nothing
    g.clock.advance(60_000);
    expect(g.tick().changed).toBe(false);
    expect(nextWakeOf(g.s)).toBeNull();
  });

  it('passes only once every URL passed; a URL that passed is not asked again', () => {
    const g = gate([check(), check({ interval_ms: 10_000 })]);
    expect(g.tick().emitted).toEqual([
      {
        type: 'ask',
        asks: [
          { index: 0, attempt: 1 },
          { index: 1, attempt: 1 },
        ],
      },
    ]);
    expect(g.answer(0, pass).state).toBe('verifying');
    g.answer(1, pending);
    g.clock.advance(10_000);
    expect(g.tick().emitted.at(-1)).toEqual({ type: 'ask', asks: [{ index: 1, attempt: 2 }] });
    expect(g.answer(1, pass).emitted).toEqual([{ type: 'passed' }]);
  });

  it('a fail verdict fails the gate at once, with its reason', () => {
    const g = gate([check(), check()]);
    g.tick();
    g.answer(0, pass);
    const r = g.answer(1, { verdict: 'fail', status: 200, error: null, reason: 'error rate 7%' });
    expect(r.state).toBe('failed');
    expect(r.emitted).toEqual([
      {
        type: 'failed',
        failure: { index: 1, reason: 'error rate 7%', error: 'verification https://verify.example/check answered fail: error rate 7%' },
      },
    ]);
    expect(g.answer(0, pass).changed).toBe(false);
  });

  it('failure_limit errors in a row fail it; a pending between them starts the count again', () => {
    const g = gate([check({ failure_limit: 2, interval_ms: 10_000 })]);
    g.tick();
    g.answer(0, error(500, 'HTTP 500'));
    g.clock.advance(10_000);
    g.tick();
    g.answer(0, pending); // the row is broken
    g.clock.advance(10_000);
    g.tick();
    expect(g.answer(0, error(null, 'target refused: loopback address')).state).toBe('verifying');
    g.clock.advance(10_000);
    g.tick();
    const r = g.answer(0, error(null, 'timed out'));
    expect(r.state).toBe('failed');
    expect((r.emitted[0] as { failure: { error: string } }).failure.error).toBe(
      'verification https://verify.example/check failed 2 times in a row (last: timed out)',
    );
  });

  it('max_wait without a pass fails it, at the tick that reaches it', () => {
    const g = gate([check({ interval_ms: 20_000, max_wait_ms: 60_000 })]);
    g.tick();
    for (let i = 0; i < 2; i++) {
      g.answer(0, pending);
      g.clock.advance(20_000);
      g.tick();
    }
    g.answer(0, pending);
    expect(nextWakeOf(g.s)).toBe(g.clock.now() + 20_000);
    g.clock.advance(20_000);
    const r = g.tick();
    expect(r.state).toBe('failed');
    expect(r.emitted[0]).toMatchObject({
      type: 'failed',
      failure: { index: 0, error: expect.stringContaining('did not pass within 1m (3 requests)') },
    });
  });

  it('a request still in flight is not asked again; one lost (a crash) is asked again one interval after it was made', () => {
    const g = gate([check({ interval_ms: 10_000 })]);
    g.tick();
    g.clock.advance(10_000);
    expect(g.tick([0]).changed).toBe(false); // in flight here: not asked twice
    // the process died with it in flight: the next one asks it again (attempt 2)
    expect(g.tick().emitted).toEqual([{ type: 'ask', asks: [{ index: 0, attempt: 2 }] }]);
  });
});

describe('readAnswer', () => {
  it('reads pass, fail with its reason, pending (by verdict or 202); anything else is an error', () => {
    expect(readAnswer(200, '{"verdict":"pass"}')).toEqual({ verdict: 'pass', status: 200, error: null, reason: null });
    expect(readAnswer(200, '{"verdict":"fail","reason":"p99 high"}')).toEqual({
      verdict: 'fail',
      status: 200,
      error: null,
      reason: 'p99 high',
    });
    expect(readAnswer(200, '{"verdict":"pending"}').verdict).toBe('pending');
    expect(readAnswer(202, '').verdict).toBe('pending');
    expect(readAnswer(200, 'ok')).toEqual({ verdict: 'error', status: 200, error: 'HTTP 200 without a verdict', reason: null });
    expect(readAnswer(500, '{"verdict":"pass"}')).toEqual({ verdict: 'error', status: 500, error: 'HTTP 500', reason: null });
    expect(readAnswer(302, '').verdict).toBe('error');
  });

  it('shows a URL without its query or credentials', () => {
    expect(shownUrl('https://user:pw@v.example:8443/check?token=abc')).toBe('https://v.example:8443/check');
  });
});
