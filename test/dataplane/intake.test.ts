// The pipeline's intake per org (CONTRACT 8, issue 27): an org holds at most its share of the
// window, any org may hold minOrgEvents however full it is, and a deleted webhook's queued attempts
// are dropped at once (counted webhook_deleted) while its attempt in flight finishes. A manual
// clock and a deliverer that answers only when the test says so: nothing here waits on time.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import type { EventRoute } from '../../src/domain/event-route.ts';
import type { AttemptCallback, AttemptResult, Deliverer } from '../../src/delivery/client.ts';
import { WebhookRegistry } from '../../src/dispatch/registry.ts';
import { BACKLOG_WAIT_MS, DeliveryPipeline, type InboundEvent } from '../../src/dataplane/pipeline.ts';
import { FairSlots } from '../../src/dataplane/slots.ts';
import { allEventsEntry } from '../helpers/webhooks.ts';

const route = (org: string): EventRoute => ({
  org,
  type: 'com.svc.test.intake',
  resource: 'installs',
  op: 'provision',
  event: 'lifecycle.started',
  install: null,
  component: null,
  action: null,
  rev: 0,
});

/** A deliverer whose attempts hang until answer() is called. */
function heldDeliverer() {
  const open: Array<{ url: string; done: AttemptCallback }> = [];
  const d = {
    send: (url: string, _h: Record<string, string>, _b: Buffer, done: AttemptCallback) => void open.push({ url, done }),
    hostOf: () => 'host',
  } as unknown as Deliverer;
  const answer = (pred: (url: string) => boolean, r: AttemptResult) => {
    for (const a of open.filter((x) => pred(x.url))) {
      open.splice(open.indexOf(a), 1);
      a.done(r);
    }
  };
  return { d, open, answer };
}

function rig(o: { maxEvents?: number; minOrgEvents?: number } = {}) {
  const registry = new WebhookRegistry();
  for (const [i, x] of ['a', 'b', 'c', 'd', 'e'].entries())
    registry.upsert(allEventsEntry(`org_${x}`, `wh_${x}`, `http://${x}.test/hook`), i + 1);
  const { d, open, answer } = heldDeliverer();
  const dropped: Array<[string, number]> = [];
  const settled = new Set<string>();
  const clock = new ManualClock();
  let caughtUpCalls = 0;
  const pipeline = new DeliveryPipeline({
    registry,
    deliverer: d,
    sign: () => ({}),
    outcomes: { record: () => {}, flush: async () => {} },
    progress: null,
    clock,
    logger: pino({ level: 'silent' }),
    concurrency: 16,
    maxEvents: o.maxEvents ?? 100,
    minOrgEvents: o.minOrgEvents ?? 4,
    dropped: (reason, n) => void dropped.push([reason, n]),
    caughtUp: () => void caughtUpCalls++,
  });
  let n = 0;
  const send = (org: string, count = 1) => {
    for (let i = 0; i < count; i++) {
      const id = `${org}_${n++}`;
      const ev: InboundEvent = {
        id,
        route: route(org),
        body: Buffer.from('{}'),
        done: [],
        settle: () => void settled.add(id),
        release: () => {},
      };
      pipeline.accept(ev);
    }
  };
  /** what a source does: take an org's events while roomFor(org) says so; how many it took */
  const offer = (org: string, count: number) => {
    let took = 0;
    while (took < count && pipeline.roomFor(org) > 0) {
      send(org);
      took++;
    }
    return took;
  };
  return { registry, pipeline, open, answer, dropped, settled, offer, clock, caughtUpCalls: () => caughtUpCalls };
}

describe('intake per org (CONTRACT 8)', () => {
  it("an org's backlog stops at its share of the window; another org's events are still taken", () => {
    const r = rig({ maxEvents: 100, minOrgEvents: 4 });
    // alone, A takes half the window (room is kept for one more org), not all of it
    expect(r.offer('org_a', 1000)).toBe(50);
    expect(r.pipeline.roomFor('org_a')).toBe(0);
    expect(r.pipeline.room()).toBeGreaterThan(0);
    // B comes: its share is a third of the window (two orgs holding, and room for one more)
    expect(r.offer('org_b', 1000)).toBe(33);
    expect(r.pipeline.heldOf('org_a')).toBe(50);
    expect(r.pipeline.heldOf('org_b')).toBe(33);
    // C comes while A and B hang: it still gets its share
    expect(r.pipeline.roomFor('org_c')).toBeGreaterThan(0);
  });

  it('however full the window, any org may hold minOrgEvents (a reserve above it), and no more', () => {
    const r = rig({ maxEvents: 12, minOrgEvents: 2 });
    // three orgs, each taking its share as it comes (6, 4, then what is left): the window is full
    for (const org of ['org_a', 'org_b', 'org_c']) r.offer(org, 1000);
    expect(r.pipeline.held()).toBe(12);
    expect(r.offer('org_a', 1)).toBe(0);
    // another org: minOrgEvents from the reserve
    expect(r.offer('org_d', 1000)).toBe(2);
    // the reserve (12 / 4) bounds what is held whatever comes
    r.offer('org_e', 1000);
    expect(r.pipeline.held()).toBe(12 + 3);
    expect(r.pipeline.room()).toBe(0);
  });

  it(
    'an org with work enough queued (pressure 4 × concurrency): its next events are taken and parked, then fanned out oldest ' +
      'first as attempts finish',
    () => {
      const r = rig({ maxEvents: 1000, minOrgEvents: 4 });
      // org_a has 4 webhooks (untried: each counts up to 32 queued attempts), concurrency 16: bound 64
      for (const [i, h] of ['a2', 'a3', 'a4'].entries())
        r.registry.upsert(allEventsEntry('org_a', `wh_${h}`, `http://${h}.test/hook`), 10 + i);
      expect(r.offer('org_a', 100)).toBe(100);
      const parked = r.pipeline.parkedEvents();
      expect(parked).toBeGreaterThan(70);
      expect(parked).toBeLessThan(90);
      // parking does not close the org's intake: it is bounded by its share of the window
      expect(r.pipeline.roomFor('org_a')).toBeGreaterThan(0);
      expect(r.pipeline.parkedSince('org_a_99')).toBe(r.clock.now());
      expect(r.pipeline.parkedSince('org_a_0')).toBeUndefined();
      let rounds = 0;
      for (; r.open.length && rounds < 1000; rounds++) {
        r.answer(() => true, { delivered: true, status: 200, duration_ms: 1 });
        expect(r.pipeline.parkedEvents()).toBeLessThanOrEqual(parked);
      }
      expect(r.pipeline.parkedEvents()).toBe(0);
      expect(r.settled.size).toBe(100);
      // in the order taken
      expect([...r.settled]).toEqual(Array.from({ length: 100 }, (_, i) => `org_a_${i}`));
      expect(r.pipeline.held()).toBe(0);
    },
  );

  it('parked events can be given back whole (withdraw): no longer held, neither settled nor attempted', () => {
    const r = rig({ maxEvents: 1000, minOrgEvents: 4 });
    for (const [i, h] of ['a2', 'a3', 'a4'].entries())
      r.registry.upsert(allEventsEntry('org_a', `wh_${h}`, `http://${h}.test/hook`), 10 + i);
    r.offer('org_a', 100);
    const held = r.pipeline.held();
    const parked = r.pipeline.parkedEvents();
    // one of them has attempts: nothing is given back
    expect(r.pipeline.withdraw(['org_a_0', 'org_a_99'])).toBe(false);
    expect(r.pipeline.held()).toBe(held);
    expect(r.pipeline.withdraw(['org_a_98', 'org_a_99'])).toBe(true);
    expect(r.pipeline.held()).toBe(held - 2);
    expect(r.pipeline.parkedEvents()).toBe(parked - 2);
    expect(r.pipeline.withdraw(['org_a_99'])).toBe(false);
    for (let rounds = 0; r.open.length && rounds < 1000; rounds++) r.answer(() => true, { delivered: true, status: 200, duration_ms: 1 });
    expect(r.settled.size).toBe(98);
    expect(r.settled.has('org_a_98') || r.settled.has('org_a_99')).toBe(false);
    expect(r.pipeline.held()).toBe(0);
  });

  it("a deleted webhook's queued attempts are dropped and counted, its events settle, its attempts in flight finish", () => {
    const r = rig({ maxEvents: 1000, minOrgEvents: 4 });
    r.offer('org_a', 20);
    // 8 in flight at wh_a (CONTRACT 6.6), 12 queued
    expect(r.open).toHaveLength(8);
    expect(r.registry.remove('org_a', 'wh_a', 10)).toBe(true);
    expect(r.dropped).toEqual([['webhook_deleted', 12]]);
    expect(r.settled.size).toBe(12); // their only webhook is gone: settled
    expect(r.open).toHaveLength(8); // nothing new started
    r.answer(() => true, { delivered: true, status: 200, duration_ms: 1 });
    expect(r.settled.size).toBe(20);
    expect(r.pipeline.held()).toBe(0);
    expect(r.open).toHaveLength(0);
  });

  it(
    'a disabled webhook (CONTRACT 4.1): its queued attempts are dropped and counted webhook_disabled, new events make none; ' +
      'enabled, it gets them again',
    () => {
      const r = rig({ maxEvents: 1000, minOrgEvents: 4 });
      r.offer('org_a', 20);
      expect(r.open).toHaveLength(8);
      expect(r.registry.upsert({ ...allEventsEntry('org_a', 'wh_a', 'http://a.test/hook'), disabled: true }, 10)).toBe(true);
      expect(r.dropped).toEqual([['webhook_disabled', 12]]);
      expect(r.settled.size).toBe(12);
      r.offer('org_a', 5);
      expect(r.dropped).toEqual([['webhook_disabled', 12], ...Array.from({ length: 5 }, () => ['webhook_disabled', 1])]);
      expect(r.settled.size).toBe(17);
      expect(r.open).toHaveLength(8); // only those in flight before
      r.answer(() => true, { delivered: true, status: 200, duration_ms: 1 });
      expect(r.settled.size).toBe(25);
      r.registry.upsert(allEventsEntry('org_a', 'wh_a', 'http://a.test/hook'), 11);
      r.offer('org_a', 2);
      expect(r.open).toHaveLength(2);
    },
  );
});

describe('FairSlots per org', () => {
  it('counts queued attempts and pressure per org, and drops a webhook queue', () => {
    const clock = new ManualClock();
    const s = new FairSlots<number>({ clock, concurrency: 4, perWebhook: 8 });
    for (let i = 0; i < 10; i++) s.push('A', 'a1', i);
    for (let i = 0; i < 3; i++) s.push('B', 'b1', i);
    expect(s.queuedOf('A')).toBe(10);
    expect(s.queuedOf('B')).toBe(3);
    // a webhook not yet tried, or known fast, adds its backlog (up to 32) to its org's pressure only
    expect(s.pressureOf('A')).toBe(10);
    expect(s.pressureOf('B')).toBe(3);
    const g = s.next()!;
    clock.advance(5);
    s.done(g, true);
    expect(s.pressureOf(g.org)).toBe(s.queuedOf(g.org));
    expect(s.pressureOf(g.org === 'A' ? 'B' : 'A')).toBe(g.org === 'A' ? 3 : 10);
    const before = s.queuedOf('A');
    expect(s.drop('a1')).toHaveLength(before);
    expect(s.queuedOf('A')).toBe(0);
    expect(s.pressureOf('A')).toBe(0);
    expect(s.queued).toBe(s.queuedOf('B'));
    // the slots go on with B
    const rest: number[] = [];
    for (let n = s.next(); n; n = s.next()) rest.push(n.item);
    expect(rest.length).toBeGreaterThan(0);
  });
});

describe(
  'backlogReport: the orgs whose deliveries queue here, and those that no longer do ' + '(told to the control plane with outcome batches)',
  () => {
    const backlogged = (r: ReturnType<typeof rig>) => r.pipeline.backlogReport().backlogged;

    it(
      'an org is backlogged when every attempt of it started since the last call waited BACKLOG_WAIT_MS or more; each call ' +
        'starts again',
      () => {
        const r = rig({ maxEvents: 1000, minOrgEvents: 4 });
        // nothing started yet: no org
        expect(backlogged(r)).toEqual([]);
        // org_a: 8 attempts start at once (its webhook's bound), 8 more queue behind them
        r.offer('org_a', 16);
        expect(r.open).toHaveLength(8);
        // org_b: one attempt, started at once
        r.offer('org_b', 1);
        expect(backlogged(r)).toEqual([]);
        // org_a's queued attempts start only once the first ones are answered, BACKLOG_WAIT_MS later
        r.clock.advance(BACKLOG_WAIT_MS);
        r.answer((url) => url.startsWith('http://a.'), { delivered: true, status: 200, duration_ms: BACKLOG_WAIT_MS });
        expect(r.open.filter((a) => a.url.startsWith('http://a.'))).toHaveLength(8);
        expect(backlogged(r)).toEqual(['org_a']);
        // nothing of org_a started since: the record starts again, and it is not told twice
        expect(backlogged(r)).toEqual([]);
        // one attempt that started promptly is enough to say its org's deliveries do not queue
        r.answer((url) => url.startsWith('http://a.'), { delivered: true, status: 200, duration_ms: 1 });
        r.offer('org_a', 9); // 8 start at once, one waits
        r.clock.advance(BACKLOG_WAIT_MS);
        r.answer((url) => url.startsWith('http://a.'), { delivered: true, status: 200, duration_ms: BACKLOG_WAIT_MS });
        expect(r.open.filter((a) => a.url.startsWith('http://a.'))).toHaveLength(1); // the one that waited
        expect(backlogged(r)).toEqual([]);
      },
    );

    it("a backlogged org's first prompt attempt is told at once (caughtUp), and named in the next report's caughtUp only", () => {
      const r = rig({ maxEvents: 1000, minOrgEvents: 4 });
      // org_a backlogged, as above; org_b prompt
      r.offer('org_a', 16);
      r.offer('org_b', 1);
      expect(r.pipeline.backlogReport()).toEqual({ backlogged: [], caughtUp: [] });
      r.clock.advance(BACKLOG_WAIT_MS);
      r.answer((url) => url.startsWith('http://a.'), { delivered: true, status: 200, duration_ms: BACKLOG_WAIT_MS });
      expect(r.pipeline.backlogReport()).toEqual({ backlogged: ['org_a'], caughtUp: [] });
      // its queue drains, still waiting: nothing told
      r.clock.advance(BACKLOG_WAIT_MS);
      r.answer((url) => url.startsWith('http://a.'), { delivered: true, status: 200, duration_ms: BACKLOG_WAIT_MS });
      expect(r.caughtUpCalls()).toBe(0);
      // a new event of it starts at once: told once, however many more start promptly
      r.offer('org_a', 3);
      expect(r.caughtUpCalls()).toBe(1);
      r.offer('org_b', 2);
      expect(r.caughtUpCalls()).toBe(1);
      expect(r.pipeline.backlogReport()).toEqual({ backlogged: [], caughtUp: ['org_a'] });
      // it was not backlogged in that report: a later prompt attempt is not told again
      r.answer(() => true, { delivered: true, status: 200, duration_ms: 1 });
      r.offer('org_a', 1);
      expect(r.caughtUpCalls()).toBe(1);
      expect(r.pipeline.backlogReport()).toEqual({ backlogged: [], caughtUp: [] });
    });
  },
);
