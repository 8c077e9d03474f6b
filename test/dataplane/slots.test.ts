// Unit tests of the fair delivery slots (src/dataplane/slots.ts; CONTRACT 6.6, 8) on a manual
// clock: fairness across orgs, the share cap while another org waits, the reserve that a hanging
// org cannot fill, the breaker's single slot and its recovery, and work conservation when alone.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import { FairSlots, type Grant, type SlotOptions } from '../../src/dataplane/slots.ts';

type Item = { org: string; hook: string; n: number };

function slots(o: Partial<SlotOptions> & { concurrency: number }) {
  const clock = new ManualClock();
  const s = new FairSlots<Item>({ clock, perWebhook: 8, ...o });
  let n = 0;
  const push = (org: string, hook: string, times = 1) => {
    for (let i = 0; i < times; i++) s.push(org, hook, { org, hook, n: n++ });
  };
  /** every attempt the slots give now */
  const drain = (): Grant<Item>[] => {
    const out: Grant<Item>[] = [];
    for (let g = s.next(); g; g = s.next()) out.push(g);
    return out;
  };
  return { clock, s, push, drain };
}

const byOrg = (gs: Grant<Item>[]) => gs.reduce<Record<string, number>>((m, g) => ((m[g.org] = (m[g.org] ?? 0) + 1), m), {});

/** Make each of these webhooks known fast: one attempt delivered at once. */
function warm(t: ReturnType<typeof slots>, org: string, hooks: string[]) {
  for (const h of hooks) t.push(org, h);
  for (let gs = t.drain(); gs.length; gs = t.drain()) for (const g of gs) t.s.done(g, true);
  expect(t.s.inFlight).toBe(0);
  expect(t.s.queued).toBe(0);
}

const names = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

describe('FairSlots', () => {
  it('shares slots between two busy orgs round robin, whatever their backlog', () => {
    const t = slots({ concurrency: 8 });
    const a = names('a', 20);
    const b = names('b', 2);
    warm(t, 'A', a);
    warm(t, 'B', b);
    for (const h of a) t.push('A', h, 50); // 1000 queued
    for (const h of b) t.push('B', h, 20); // 40 queued
    const inFlight = t.drain();
    expect(inFlight).toHaveLength(8);
    expect(byOrg(inFlight)).toEqual({ A: 4, B: 4 });
    const counts = byOrg(inFlight);
    let aWhenBDone = 0;
    // 200 completions, each followed by what the freed slot is given to
    for (let i = 0; i < 200 && inFlight.length; i++) {
      const g = inFlight.shift()!;
      t.clock.advance(5);
      t.s.done(g, true);
      for (const n of t.drain()) {
        counts[n.org] = (counts[n.org] ?? 0) + 1;
        inFlight.push(n);
      }
      if (counts.B === 40 && !aWhenBDone) aWhenBDone = counts.A;
      if (i === 40) {
        // both busy: each holds about half the slots
        const held = byOrg(inFlight);
        expect(held.A).toBeGreaterThanOrEqual(3);
        expect(held.B).toBeGreaterThanOrEqual(3);
      }
    }
    // B's 40 went out at about the same pace as A's, not after A's 1000
    expect(counts.B).toBe(40);
    expect(aWhenBDone).toBeGreaterThanOrEqual(36);
    expect(aWhenBDone).toBeLessThanOrEqual(44);
  });

  it('keeps a reserve that a hanging org cannot fill, and caps it to its share while another org waits', () => {
    const t = slots({ concurrency: 16, reserve: 2, minShare: 1 });
    // org A: 40 receivers never heard of before (they will hang), 20 attempts each
    for (const h of names('a', 40)) t.push('A', h, 20);
    const aHeld = t.drain();
    expect(aHeld).toHaveLength(14); // alone, but not into the reserve: its webhooks are not known fast
    expect(t.s.queued).toBe(800 - 14);
    // org B arrives: its first attempt gets a reserved slot at once
    t.push('B', 'b0', 4);
    const b1 = t.drain();
    expect(b1.map((g) => g.org)).toEqual(['B']);
    // B's webhook is not known fast yet and B holds its minimum: the last slot stays free
    expect(t.drain()).toEqual([]);
    t.clock.advance(3);
    t.s.done(b1[0], true); // delivered in 3 ms: B's webhook is fast now
    const b2 = t.drain();
    expect(b2.map((g) => g.org)).toEqual(['B', 'B']);
    // A's hanging attempts time out one by one: their slots go to B while B waits (A is over its share)
    t.clock.advance(5000);
    t.s.done(aHeld.shift()!, false);
    const next = t.drain();
    expect(next.map((g) => g.org)).toEqual(['B']);
    for (const g of [...b2, ...next]) t.s.done(g, true);
    // B done and nothing of it queued: A may take freed slots again (work conserving), outside the reserve
    expect(t.s.queued).toBe(800 - 14);
    const more = t.drain();
    expect(more.every((g) => g.org === 'A')).toBe(true);
    expect(t.s.inFlight).toBe(14);
  });

  it('uses every slot for one org alone when its webhooks answer fast', () => {
    const t = slots({ concurrency: 64 });
    const hooks = names('h', 5000);
    warm(t, 'A', hooks);
    for (let round = 0; round < 10; round++) for (const h of hooks) t.push('A', h);
    let inFlight = t.drain();
    expect(inFlight).toHaveLength(64);
    let delivered = inFlight.length;
    let minInFlight = 64;
    while (inFlight.length) {
      t.clock.advance(1);
      for (const g of inFlight) t.s.done(g, true);
      inFlight = t.drain();
      delivered += inFlight.length;
      if (t.s.queued > 0) minInFlight = Math.min(minInFlight, inFlight.length);
    }
    expect(delivered).toBe(50_000);
    expect(minInFlight).toBe(64);
  });

  it('gives an org whose webhooks are new everything but the reserve, and every slot once they answered fast', () => {
    const t = slots({ concurrency: 16, reserve: 4 });
    for (const h of names('h', 100)) t.push('A', h, 2);
    const first = t.drain();
    expect(first).toHaveLength(12);
    t.clock.advance(2);
    for (const g of first) t.s.done(g, true);
    // the 12 answered fast: their second attempts may use the reserve too
    expect(t.drain()).toHaveLength(16);
  });

  it('leaves a webhook whose recent attempts all failed one attempt in flight, until one is delivered', () => {
    const t = slots({ concurrency: 64, tripAfter: 3 });
    t.push('A', 'dead', 30);
    let g = t.drain();
    expect(g).toHaveLength(8);
    expect(t.s.limitOf('dead')).toBe(8);
    t.clock.advance(5000);
    for (const x of g.splice(0, 3)) t.s.done(x, false);
    expect(t.s.limitOf('dead')).toBe(1); // tripped: 5 still in flight, nothing more starts
    expect(t.drain()).toEqual([]);
    for (const x of g) t.s.done(x, false);
    g = t.drain();
    expect(g).toHaveLength(1); // half-open: one probe
    expect(t.drain()).toEqual([]);
    t.clock.advance(5000);
    t.s.done(g[0], false);
    g = t.drain();
    expect(g).toHaveLength(1);
    t.clock.advance(20);
    t.s.done(g[0], true); // it answers again
    expect(t.s.limitOf('dead')).toBe(8);
    expect(t.drain()).toHaveLength(8);
  });

  it('shares an org between its webhooks: one with a long queue does not hold back another', () => {
    const t = slots({ concurrency: 2, reserve: 0 });
    t.push('A', 'busy', 100);
    const g = t.drain();
    expect(g).toHaveLength(2);
    t.push('A', 'quiet', 1);
    t.s.done(g[0], true);
    t.s.done(g[1], true);
    expect(t.drain().map((x) => x.webhook)).toContain('quiet');
  });

  it('counts as pressure the backlog of webhooks known fast or not yet tried, at most `parked` each, per org', () => {
    const t = slots({ concurrency: 4, reserve: 0, parked: 32 });
    warm(t, 'B', ['fast']);
    t.push('B', 'fast', 100);
    expect(t.s.pressure).toBe(32);
    // 40 new webhooks, 20 attempts each: taken to be fast until they answer; A's pressure, not B's
    for (const h of names('a', 40)) t.push('A', h, 20);
    expect(t.s.pressureOf('A')).toBe(800);
    expect(t.s.pressureOf('B')).toBe(32);
    // A's webhooks turn out slow (they answer after 5 s) and the fast one failing: neither counts now
    const tried = new Set<string>();
    for (let round = 0; round < 100 && (tried.size < 41 || t.s.pressureOf('B') > 0); round++) {
      const g = t.drain();
      t.clock.advance(5000);
      for (const x of g) {
        tried.add(x.webhook);
        t.s.done(x, x.webhook !== 'fast');
      }
    }
    expect(tried.size).toBe(41);
    expect(t.s.pressure).toBe(0);
    expect(t.s.queued).toBeGreaterThan(0);
    t.s.clear();
    expect(t.s.pressure).toBe(0);
  });

  it('forgets queued attempts on clear() but keeps the slots of those in flight until done()', () => {
    const t = slots({ concurrency: 4, reserve: 0 });
    t.push('A', 'a', 10);
    t.push('B', 'b', 10);
    const g = t.drain();
    expect(g).toHaveLength(4);
    t.s.clear();
    expect(t.s.queued).toBe(0);
    expect(t.s.inFlight).toBe(4);
    for (const x of g) t.s.done(x, true);
    expect(t.s.inFlight).toBe(0);
    expect(t.drain()).toEqual([]);
  });
});
