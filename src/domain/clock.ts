// Time, injected: every timer and every "now" of svc comes from a Clock, so that tests advance
// time instead of sleeping. `systemClock` is the real one; tests use `ManualClock` (test/helpers/clock.ts).

export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** milliseconds since the epoch */
  now(): number;
  /** runs fn once after ms (never kept alive: a timer does not hold the process open) */
  setTimeout(fn: () => void, ms: number): Timer;
  /** runs fn every ms until cancelled (unref'd like setTimeout) */
  setInterval(fn: () => void, ms: number): Timer;
}

function realClock(holdsProcess: boolean): Clock {
  return {
    now: () => Date.now(),
    setTimeout(fn, ms) {
      const t = setTimeout(fn, ms);
      if (!holdsProcess) t.unref?.();
      return { cancel: () => clearTimeout(t) };
    },
    setInterval(fn, ms) {
      const t = setInterval(fn, ms);
      if (!holdsProcess) t.unref?.();
      return { cancel: () => clearInterval(t) };
    },
  };
}

export const systemClock: Clock = realClock(false);

/**
 * The system clock for a command that waits in the foreground (`svc webhooks recover` following a
 * recovery): its timers hold the process open, where systemClock's never do.
 */
export const foregroundClock: Clock = realClock(true);

/**
 * Resolves after `ms` on `clock`: the one sleep of svc (every wait goes through a Clock, so that a
 * test's ManualClock skips it instead of sleeping).
 */
export function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.setTimeout(resolve, ms));
}

/**
 * `p`, but waited for at most `ms`: 'done' if it settled in time (a rejection counts as settled,
 * never thrown), 'timeout' otherwise. For bounded waits at shutdown (drains, last flushes).
 */
export async function within(clock: Clock, p: Promise<unknown>, ms: number): Promise<'done' | 'timeout'> {
  let timer: Timer | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => (timer = clock.setTimeout(() => resolve('timeout'), ms)));
  try {
    return await Promise.race([
      p.then(
        () => 'done' as const,
        () => 'done' as const,
      ),
      timedOut,
    ]);
  } finally {
    timer?.cancel();
  }
}

export interface RetryPolicy {
  /** wait before the n-th retry (n from 1) */
  delayMs(n: number): number;
  /** give up after this many attempts (default: never, until `stopped()`) */
  attempts?: number;
  /** checked before each attempt: true ends the loop (the last error is thrown, or undefined returned) */
  stopped?: () => boolean;
  /** an error this says no to is thrown at once, not retried (default: every error is retried) */
  retryable?: (err: unknown) => boolean;
  /** told of each failure before the wait (the first one is usually logged) */
  onError?: (err: unknown, attempt: number) => void;
}

/** Runs `fn` until it succeeds, waiting on `clock` between attempts as `policy` says. */
export async function retry<T>(clock: Clock, policy: RetryPolicy, fn: (attempt: number) => Promise<T>): Promise<T | undefined> {
  let lastErr: unknown;
  for (let attempt = 1; ; attempt++) {
    if (policy.stopped?.()) return undefined;
    try {
      return await fn(attempt);
    } catch (err) {
      lastErr = err;
      if (policy.retryable && !policy.retryable(err)) throw err;
      policy.onError?.(err, attempt);
      if (policy.attempts !== undefined && attempt >= policy.attempts) throw lastErr;
      await sleep(clock, policy.delayMs(attempt));
    }
  }
}

/** ISO 8601 UTC of a clock's now. */
export function isoNow(clock: Clock): string {
  return new Date(clock.now()).toISOString();
}

/**
 * `fn` run at the next turn of the event loop (setImmediate, not a Clock's: a turn, not a time),
 * once however many times the returned function is called before then; called again once `fn`
 * has started, it schedules another run.
 */
export function nextTurnOnce(fn: () => void): () => void {
  let scheduled = false;
  return () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      fn();
    });
  };
}
