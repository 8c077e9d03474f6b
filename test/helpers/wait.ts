// Waiting on a condition instead of sleeping: poll until it holds, or fail saying what was awaited.

/** Poll until `fn` returns a truthy value; `what` names it in the failure (a function: read when it fails). */
export async function waitFor<T>(
  fn: () => T | Promise<T>,
  timeoutMs = 10_000,
  what: string | (() => string) = 'condition',
): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'function' ? what() : what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
