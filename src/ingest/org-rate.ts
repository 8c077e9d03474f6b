// Producer facts per org as a rate (CONTRACT §8, §9 --ingest-rate-per-org): a token bucket per org
// on the injected clock, filled at `perSecond` tokens a second up to four seconds' worth (the
// burst). A fact takes a token; with none left it is refused at once, before it is queued, with the
// time until the next token (`{"ok": false, "error": "rate_limited", "retry_after_ms": N}`).
import type { Clock } from '../domain/clock.ts';

/** The burst: this many seconds of the rate. */
export const BURST_SECONDS = 4;
/**
 * Past this many buckets, the full ones (the same as no bucket) are swept out, at most once a second:
 * the memory stays bounded by the orgs sending within the last few seconds, whatever subjects are sent.
 */
const SWEEP_AT = 10_000;
const SWEEP_EVERY_MS = 1000;

interface Bucket {
  tokens: number;
  atMs: number;
}

export class OrgRateLimit {
  private readonly buckets = new Map<string, Bucket>();
  private readonly burst: number;
  private sweptAtMs = Number.NEGATIVE_INFINITY;

  constructor(
    readonly perSecond: number,
    private readonly clock: Clock,
  ) {
    if (!(perSecond > 0)) throw new Error(`a rate must be more than 0, not ${perSecond}`);
    this.burst = perSecond * BURST_SECONDS;
  }

  /** Take a token of the org's: 0 when there was one, else the ms until there is (nothing taken). */
  take(orgId: string): number {
    const now = this.clock.now();
    let b = this.buckets.get(orgId);
    if (!b) {
      if (this.buckets.size >= SWEEP_AT && now - this.sweptAtMs >= SWEEP_EVERY_MS) this.sweep(now);
      this.buckets.set(orgId, (b = { tokens: this.burst, atMs: now }));
    } else {
      // a clock stepped back refills nothing (and takes nothing away)
      b.tokens = Math.min(this.burst, b.tokens + (Math.max(0, now - b.atMs) * this.perSecond) / 1000);
      b.atMs = now;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil(((1 - b.tokens) * 1000) / this.perSecond));
  }

  /** Orgs with a bucket (full ones may be among them until a sweep). */
  get size(): number {
    return this.buckets.size;
  }

  private sweep(now: number): void {
    this.sweptAtMs = now;
    for (const [org, b] of this.buckets) if (b.tokens + ((now - b.atMs) * this.perSecond) / 1000 >= this.burst) this.buckets.delete(org);
  }
}
