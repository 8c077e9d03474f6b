// Waiting on a condition instead of sleeping: poll until it holds, or fail saying what was awaited.
// Where real time itself is the point (a producer's pace or back-off, a receiver that holds its
// answer, a real process's moment, a negative: nothing may happen within a while), pause() and
// later() take a `why` that says so at each use; within() bounds a wait.

/** Poll until `fn` returns a truthy value; `what` names it in the failure (a function: read when it fails). */
export async function waitFor<T>(
  fn: () => T | Promise<T>,
  timeoutMs = 10_000,
  what: string | (() => string) = 'condition',
  everyMs = 25,
): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'function' ? what() : what}`);
    // the poll interval: how often the condition is looked at, not a wait for anything
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** `ms` of real time, where real time is the point; `why` says why at each use. */
export function pause(ms: number, why: string): Promise<void> {
  return new Promise((r) => later(ms, r, why));
}

/** Run `fn` after `ms` of real time (e.g. a receiver that holds its answer); `why` says why at each use. */
export function later(ms: number, fn: () => void, why: string): NodeJS.Timeout {
  if (!why) throw new Error('later/pause: say why real time is needed');
  // the one real-time timer of the tests' waits: each caller's `why` is its reason
  return setTimeout(fn, ms);
}

/** `p`, or undefined once `ms` have passed: a bound on a wait, not a wait (the timer ends with `p`). */
export async function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<undefined>((r) => (timer = later(ms, () => r(undefined), 'a bound: give up waiting after ms')));
  try {
    return await Promise.race([p, bound]);
  } finally {
    clearTimeout(timer);
  }
}
