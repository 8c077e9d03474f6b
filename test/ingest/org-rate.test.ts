// The per-org token bucket of ingest (src/ingest/org-rate.ts, CONTRACT §8 --ingest-rate-per-org)
// on a ManualClock: a burst of four seconds of the rate, then the rate; each org its own bucket.
import { describe, expect, it } from 'vitest';
import { BURST_SECONDS, OrgRateLimit } from '../../src/ingest/org-rate.ts';
import { ManualClock } from '../helpers/clock.ts';

const takeAll = (r: OrgRateLimit, org: string, n: number) => Array.from({ length: n }, () => r.take(org));

describe('OrgRateLimit', () => {
  it('lets a burst of four seconds of the rate through, then refuses with the time until the next token', () => {
    const clock = new ManualClock();
    const r = new OrgRateLimit(100, clock);
    expect(takeAll(r, 'org_a', 100 * BURST_SECONDS).every((w) => w === 0)).toBe(true);
    expect(r.take('org_a')).toBe(10); // a token every 10 ms
    clock.advance(4);
    expect(r.take('org_a')).toBe(6);
    clock.advance(6);
    expect(r.take('org_a')).toBe(0);
    expect(r.take('org_a')).toBe(10);
  });

  it('refills at the rate, never past the burst', () => {
    const clock = new ManualClock();
    const r = new OrgRateLimit(50, clock);
    takeAll(r, 'org_a', 200);
    clock.advance(1000);
    expect(takeAll(r, 'org_a', 51).filter((w) => w === 0)).toHaveLength(50);
    clock.advance(3_600_000);
    expect(takeAll(r, 'org_a', 201).filter((w) => w === 0)).toHaveLength(200);
  });

  it("keeps each org's bucket apart: one org's flood leaves another's burst whole", () => {
    const clock = new ManualClock();
    const r = new OrgRateLimit(10, clock);
    takeAll(r, 'org_a', 1000);
    expect(r.take('org_a')).toBeGreaterThan(0);
    expect(takeAll(r, 'org_b', 40).every((w) => w === 0)).toBe(true);
  });

  it('keeps its memory bounded: full buckets are swept out past 10,000 orgs', () => {
    const clock = new ManualClock();
    const r = new OrgRateLimit(10, clock);
    for (let i = 0; i < 10_000; i++) r.take(`org_${i}`);
    clock.advance(5000); // every bucket full again
    r.take('org_new');
    expect(r.size).toBe(1);
  });
});
