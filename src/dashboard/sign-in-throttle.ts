// A short back-off after repeated failed dashboard sign-ins for one org (CONTRACT 6.7): after
// MAX_FAILURES failures within WINDOW_MS, every sign-in for that org (right or wrong) is refused
// until the oldest of them is WINDOW_MS old. Time is the injected clock's. Bounded: at most
// MAX_ORGS org ids are followed (the oldest forgotten first).
import type { Clock } from '../domain/clock.ts';

export const SIGN_IN_MAX_FAILURES = 5;
export const SIGN_IN_WINDOW_MS = 60_000;
const MAX_ORGS = 10_000;

export class SignInThrottle {
  /** failure times per org id (ms), oldest first */
  private readonly failures = new Map<string, number[]>();

  constructor(private readonly clock: Clock) {}

  private recent(orgId: string): number[] {
    const since = this.clock.now() - SIGN_IN_WINDOW_MS;
    const times = (this.failures.get(orgId) ?? []).filter((t) => t > since);
    if (times.length) this.failures.set(orgId, times);
    else this.failures.delete(orgId);
    return times;
  }

  /** Milliseconds until a sign-in for this org is heard again; 0 = now. */
  blockedFor(orgId: string): number {
    const times = this.recent(orgId);
    if (times.length < SIGN_IN_MAX_FAILURES) return 0;
    return times[times.length - SIGN_IN_MAX_FAILURES] + SIGN_IN_WINDOW_MS - this.clock.now();
  }

  failed(orgId: string): void {
    const times = this.recent(orgId);
    times.push(this.clock.now());
    this.failures.delete(orgId); // re-inserted last: the map's order is that of the latest failure
    this.failures.set(orgId, times.slice(-SIGN_IN_MAX_FAILURES));
    while (this.failures.size > MAX_ORGS) this.failures.delete(this.failures.keys().next().value!);
  }

  succeeded(orgId: string): void {
    this.failures.delete(orgId);
  }
}
