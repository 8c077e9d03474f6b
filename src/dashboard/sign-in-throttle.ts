// The back-off after repeated failed dashboard sign-ins (CONTRACT 8): failures are counted per
// client address AND org, so that nobody can lock another client out of an org (the old key, the
// org alone, let anyone who knew an org id keep its users out). After MAX_FAILURES failures from one
// address for one org within WINDOW_MS, that address's sign-ins for that org (right or wrong) are
// refused until the oldest of them is WINDOW_MS old; other addresses are not affected.
//
// Bounded whatever is posted: only well-formed org ids reach it (the route answers 400 otherwise),
// an address is cut to MAX_ADDRESS characters, so a key is at most 64 + 1 + 64 characters; at most
// MAX_KEYS keys are followed (the one that failed least recently is forgotten first), each with at
// most MAX_FAILURES times. Time is the injected clock's.
import type { Clock } from '../domain/clock.ts';

export const SIGN_IN_MAX_FAILURES = 5;
export const SIGN_IN_WINDOW_MS = 60_000;
/** keys followed at most (CONTRACT 8: at most 10,000 entries of at most 200 bytes) */
export const SIGN_IN_MAX_KEYS = 10_000;
const MAX_ADDRESS = 64;

export class SignInThrottle {
  /** failure times per `<address> <org>` (ms), oldest first; the map's order is that of the latest failure */
  private readonly failures = new Map<string, number[]>();

  constructor(private readonly clock: Clock) {}

  private static key(address: string, orgId: string): string {
    return `${address.slice(0, MAX_ADDRESS)} ${orgId}`;
  }

  private recent(key: string): number[] {
    const since = this.clock.now() - SIGN_IN_WINDOW_MS;
    const times = (this.failures.get(key) ?? []).filter((t) => t > since);
    if (times.length) this.failures.set(key, times);
    else this.failures.delete(key);
    return times;
  }

  /** Milliseconds until a sign-in from this address for this org is heard again; 0 = now. */
  blockedFor(address: string, orgId: string): number {
    const times = this.recent(SignInThrottle.key(address, orgId));
    if (times.length < SIGN_IN_MAX_FAILURES) return 0;
    return times[times.length - SIGN_IN_MAX_FAILURES] + SIGN_IN_WINDOW_MS - this.clock.now();
  }

  failed(address: string, orgId: string): void {
    const key = SignInThrottle.key(address, orgId);
    const times = this.recent(key);
    times.push(this.clock.now());
    this.failures.delete(key); // re-inserted last
    this.failures.set(key, times.slice(-SIGN_IN_MAX_FAILURES));
    while (this.failures.size > SIGN_IN_MAX_KEYS) this.failures.delete(this.failures.keys().next().value!);
  }

  succeeded(address: string, orgId: string): void {
    this.failures.delete(SignInThrottle.key(address, orgId));
  }

  /** Keys followed now (for tests of the bound). */
  get size(): number {
    return this.failures.size;
  }
}
