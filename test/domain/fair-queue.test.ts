// The per-org queues of ingest (src/domain/fair-queue.ts): taken round robin, one from each org
// with items in turn; with one org, a plain FIFO.
import { describe, expect, it } from 'vitest';
import { FairQueue } from '../../src/domain/fair-queue.ts';

const take = <T>(q: FairQueue<T>, n: number): T[] => {
  const out: T[] = [];
  for (let i = 0; i < n; i++) {
    const v = q.next();
    if (v === undefined) break;
    out.push(v);
  }
  return out;
};

describe('FairQueue', () => {
  it('is a FIFO for one org, and empty when drained', () => {
    const q = new FairQueue<number>();
    for (let i = 0; i < 5000; i++) q.push('org_a', i);
    expect(q.size).toBe(5000);
    expect(take(q, 512)).toEqual(Array.from({ length: 512 }, (_, i) => i));
    expect(take(q, 10_000)).toEqual(Array.from({ length: 5000 - 512 }, (_, i) => 512 + i));
    expect(q.size).toBe(0);
    expect(q.keys).toBe(0);
    expect(q.next()).toBeUndefined();
  });

  it("takes one from each org in turn, so an org's single item is in the next group whatever another org has queued", () => {
    const q = new FairQueue<string>();
    for (let i = 0; i < 1000; i++) q.push('org_a', `a${i}`);
    q.push('org_b', 'b0');
    const group = take(q, 8);
    expect(group).toContain('b0');
    expect(group.filter((x) => x.startsWith('a'))).toEqual(['a0', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6']);
    expect(q.sizeOf('org_b')).toBe(0);
    expect(q.keys).toBe(1);
  });

  it('gives every waiting org an equal share of a group; an org with fewer leaves the rest to the others', () => {
    const q = new FairQueue<string>();
    for (let i = 0; i < 100; i++) q.push('org_a', `a${i}`);
    for (let i = 0; i < 100; i++) q.push('org_b', `b${i}`);
    for (let i = 0; i < 2; i++) q.push('org_c', `c${i}`);
    const group = take(q, 30);
    const count = (p: string) => group.filter((x) => x.startsWith(p)).length;
    expect([count('a'), count('b'), count('c')]).toEqual([14, 14, 2]);
    // each org's own items stay in order
    expect(group.filter((x) => x.startsWith('a'))).toEqual(Array.from({ length: 14 }, (_, i) => `a${i}`));
    // the turns go on where the last group stopped
    const nextGroup = take(q, 4);
    expect(nextGroup.filter((x) => x.startsWith('a')).length).toBe(2);
    expect(nextGroup.filter((x) => x.startsWith('b')).length).toBe(2);
  });

  it('lets an org that comes back take its turn again', () => {
    const q = new FairQueue<string>();
    q.push('org_a', 'a0');
    expect(take(q, 5)).toEqual(['a0']);
    q.push('org_b', 'b0');
    q.push('org_a', 'a1');
    q.push('org_b', 'b1');
    expect(take(q, 5).sort()).toEqual(['a1', 'b0', 'b1']);
    expect(q.size).toBe(0);
  });

  it('tells the fewest items any waiting org has', () => {
    const q = new FairQueue<string>();
    expect(q.fewest).toBe(0);
    for (let i = 0; i < 100; i++) q.push('org_a', `a${i}`);
    expect(q.fewest).toBe(100);
    q.push('org_b', 'b0');
    q.push('org_b', 'b1');
    expect(q.fewest).toBe(2);
    take(q, 4); // a, b, a, b: org_b has none left
    expect(q.keys).toBe(1);
    expect(q.fewest).toBe(98);
  });

  it('passes over the orgs that `ready` says no to, and gives nothing when none is ready', () => {
    const q = new FairQueue<string>();
    for (let i = 0; i < 3; i++) q.push('org_a', `a${i}`);
    for (let i = 0; i < 3; i++) q.push('org_b', `b${i}`);
    const notA = (k: string) => k !== 'org_a';
    expect([q.next(notA), q.next(notA)]).toEqual(['b0', 'b1']);
    expect(q.next(() => false)).toBeUndefined();
    expect(q.size).toBe(4);
    // every org ready again: turns alternate as before
    expect(take(q, 4)).toEqual(['a0', 'b2', 'a1', 'a2']);
  });
});
