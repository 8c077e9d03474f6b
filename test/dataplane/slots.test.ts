// Unit tests of the fair delivery slots (src/dataplane/slots.ts; CONTRACT 6.6, 8) on a manual
// clock: fairness across orgs, the share cap while another org waits, the reserve that a hanging
// org cannot fill, the breaker's single slot and its recovery, and work conservation when alone;
// slots that follow what attempts hold now (issue 49): webhooks that answered fast and then hang
// take neither another org's slot nor their own org's last ones.
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
    const t = slots({ concurrency: 8, reserve: 0 }); // no reserve nor floor: round robin alone
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
    expect(aHeld).toHaveLength(13); // alone, but neither into the floor (1) nor the reserve (2): its webhooks are not known fast
    expect(t.s.queued).toBe(800 - 13);
    t.clock.advance(4990); // A's attempts hang
    // org B arrives: its first attempts get slots at once, all but the floor (B is under its share)
    t.push('B', 'b0', 4);
    const b1 = t.drain();
    expect(b1.map((g) => g.org)).toEqual(['B', 'B']);
    // B holds its minimum: the last slot (the floor) stays free for an org that shows up
    expect(t.drain()).toEqual([]);
    t.clock.advance(3);
    t.s.done(b1.shift()!, true); // delivered in 3 ms
    const b2 = t.drain();
    expect(b2.map((g) => g.org)).toEqual(['B']);
    // A's hanging attempts time out one by one: their slots go to B while B waits (A is over its share)
    t.clock.advance(10);
    t.s.done(aHeld.shift()!, false);
    const next = t.drain();
    expect(next.map((g) => g.org)).toEqual(['B']);
    for (const g of [...b1, ...b2, ...next]) t.s.done(g, true);
    // B done and nothing of it queued: A may take freed slots again (work conserving), outside the reserve
    expect(t.s.queued).toBe(800 - 13);
    const more = t.drain();
    expect(more.every((g) => g.org === 'A')).toBe(true);
    expect(t.s.inFlight).toBe(13);
  });

  it('uses every slot but the floor for one org alone when its webhooks answer fast', () => {
    const t = slots({ concurrency: 64 }); // minShare 2: a floor of 2 slots kept for an org that shows up
    const hooks = names('h', 5000);
    warm(t, 'A', hooks);
    for (let round = 0; round < 10; round++) for (const h of hooks) t.push('A', h);
    let inFlight = t.drain();
    expect(inFlight).toHaveLength(62);
    let delivered = inFlight.length;
    let minInFlight = 62;
    while (inFlight.length) {
      t.clock.advance(1);
      for (const g of inFlight) t.s.done(g, true);
      inFlight = t.drain();
      delivered += inFlight.length;
      if (t.s.queued > 0) minInFlight = Math.min(minInFlight, inFlight.length);
    }
    expect(delivered).toBe(50_000);
    expect(minInFlight).toBe(62);
  });

  it('gives an org whose webhooks are new everything but the reserve, and every slot but the floor once they answered fast', () => {
    const t = slots({ concurrency: 16, reserve: 4 }); // minShare 1: a floor of 1
    for (const h of names('h', 100)) t.push('A', h, 2);
    const first = t.drain();
    expect(first).toHaveLength(11);
    t.clock.advance(2);
    for (const g of first) t.s.done(g, true);
    // the 11 answered fast: their second attempts may use the reserve too
    expect(t.drain()).toHaveLength(15);
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
  it("keeps the floor from an org whose fast webhooks turn to hang: another org's attempt starts at once, every round", () => {
    const t = slots({ concurrency: 256 }); // reserve 32, minShare and floor 8
    const a = names('a', 40);
    for (let round = 0; round < 10; round++) {
      warm(t, 'A', a); // A's 40 webhooks answer fast...
      for (const h of a) t.push('A', h, 20);
      const held = t.drain(); // ...then hang on the next 800
      expect(held.length).toBeLessThanOrEqual(256 - 8);
      // B shows up while A's attempts are young, and again once they hang
      for (const wait of [500, 600]) {
        t.clock.advance(wait);
        t.push('B', 'b', 1);
        const b = t.drain();
        expect(
          b.map((g) => g.org),
          `round ${round}, ${t.s.hanging} of A's attempts hanging`,
        ).toEqual(['B']);
        t.clock.advance(5);
        t.s.done(b[0], true);
      }
      expect(t.s.hanging).toBe(held.length);
      // A hanging: its webhooks take nothing more beyond its room's reserve, however fast they were
      expect(t.drain()).toEqual([]);
      // A's attempts time out; its queue is dropped (the next round starts fresh)
      t.clock.advance(5000);
      for (const g of held) t.s.done(g, false);
      for (const h of a) t.s.drop(h);
      expect(t.s.inFlight).toBe(0);
    }
  });

  it("keeps an org's last slots from its own webhooks that hang: its fast webhook's attempts start at once", () => {
    const t = slots({ concurrency: 64 }); // reserve 8, floor 2
    const hanging = names('h', 40);
    warm(t, 'A', [...hanging, 'fast']);
    for (const h of hanging) t.push('A', h, 20);
    const held = t.drain();
    expect(held.length).toBeLessThanOrEqual(64 - 2 - 2);
    for (let i = 0; i < 10; i++) {
      t.clock.advance(300); // A's 40 answer no more: young at first, then hanging
      t.push('A', 'fast', 2);
      const f = t.drain();
      expect(
        f.map((g) => g.webhook),
        `after ${300 * (i + 1)} ms`,
      ).toEqual(['fast']);
      t.clock.advance(5);
      t.s.done(f[0], true);
      const f2 = t.drain(); // its second, once it holds nothing again
      expect(f2.map((g) => g.webhook)).toEqual(['fast']);
      t.s.done(f2[0], true);
    }
    // a webhook with an attempt older than fastMs is fast no more: its queue is not pressure
    expect(t.s.hanging).toBe(held.length);
    expect(t.s.pressureOf('A')).toBe(0);
  });

  it("gives another org's ping a slot at once beside 100 webhooks that answered a ping fast and hang on a resend", () => {
    const t = slots({ concurrency: 64 }); // the pings' and resends' slots (src/dataplane/control-attempts.ts)
    const a = names('a', 100);
    warm(t, 'A', a); // the pings
    for (const h of a) t.push('A', h, 1); // the resends
    const held = t.drain();
    expect(held.length).toBeLessThanOrEqual(64 - 2);
    for (const wait of [0, 400, 700, 2000]) {
      t.clock.advance(wait);
      t.push('B', 'b', 1);
      const b = t.drain();
      expect(
        b.map((g) => g.org),
        `${wait} ms on`,
      ).toEqual(['B']);
      t.s.done(b[0], true);
    }
  });
});
