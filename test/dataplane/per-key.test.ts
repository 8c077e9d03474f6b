// Ordered delivery per key (CONTRACT 10.1) in the pipeline: a `per_key` webhook's attempts of one
// ordering key are made one at a time, in the order the events came; different keys go in
// parallel (up to the webhook's 8); a key whose attempt hangs holds only itself; an unordered
// webhook of the same events is not held back by them; deleting the webhook drops what waits.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import type { EventRoute } from '../../src/domain/event-route.ts';
import { WebhookRegistry } from '../../src/dispatch/registry.ts';
import type { AttemptCallback, Deliverer } from '../../src/delivery/client.ts';
import { DeliveryPipeline, type ProgressStore } from '../../src/dataplane/pipeline.ts';
import pino from 'pino';
import { allEventsEntry } from '../helpers/webhooks.ts';

const routeOf = (key: string): EventRoute => ({
  org: 'org_a',
  type: 'com.svc.test.key',
  resource: 'installs',
  op: 'provision',
  event: 'lifecycle.started',
  install: null,
  component: null,
  action: null,
  rev: 0,
  key,
});

interface Sent {
  url: string;
  id: string;
  done: AttemptCallback;
}

function rig(progress: ProgressStore | null = null) {
  const registry = new WebhookRegistry();
  registry.upsert({ ...allEventsEntry('org_a', 'wh_ordered', 'http://o.test/hook'), ordering: 'per_key' }, 1);
  registry.upsert(allEventsEntry('org_a', 'wh_plain', 'http://p.test/hook'), 2);
  const sent: Sent[] = [];
  const deliverer = {
    send: (url: string, headers: Record<string, string>, _b: Buffer, done: AttemptCallback) =>
      void sent.push({ url, id: headers['webhook-id'], done }),
    hostOf: () => 'host',
  } as unknown as Deliverer;
  const pipeline = new DeliveryPipeline({
    registry,
    deliverer,
    sign: (_sub, eventId) => ({ 'webhook-id': eventId }),
    outcomes: { record: () => {}, flush: async () => {} },
    progress,
    logger: pino({ level: 'silent' }),
    clock: new ManualClock(),
    concurrency: 64,
  });
  const settled: string[] = [];
  const accept = (id: string, key: string) =>
    pipeline.accept({ id, route: routeOf(key), body: Buffer.from('{}'), done: [], settle: () => void settled.push(id), release: () => {} });
  const at = (host: string) => sent.filter((s) => s.url.includes(host));
  const answer = (s: Sent, delivered = true) => s.done({ delivered, status: delivered ? 200 : 500, duration_ms: 1 });
  return { pipeline, registry, sent, settled, accept, at, answer };
}

describe('per_key ordering in the pipeline', () => {
  it("one attempt of a key at a time, in order, whatever the outcome; other keys and the unordered webhook don't wait", () => {
    const r = rig();
    for (let i = 1; i <= 3; i++) {
      r.accept(`a${i}`, 'inst_a');
      r.accept(`b${i}`, 'inst_b');
    }
    // the ordered webhook: the head of each key; the plain one: all six
    expect(r.at('o.test').map((s) => s.id)).toEqual(['a1', 'b1']);
    expect(r.at('p.test').map((s) => s.id)).toEqual(['a1', 'b1', 'a2', 'b2', 'a3', 'b3']);
    // a2 goes once a1 has an outcome, a failure too (one attempt each, no retry)
    r.answer(r.at('o.test')[0], false);
    expect(r.at('o.test').map((s) => s.id)).toEqual(['a1', 'b1', 'a2']);
    r.answer(r.at('o.test')[2]);
    r.answer(r.at('o.test')[1]);
    expect(r.at('o.test').map((s) => s.id)).toEqual(['a1', 'b1', 'a2', 'a3', 'b2']);
    // a key whose attempt hangs (b2 unanswered) holds only itself: a's next events go on
    r.accept('a4', 'inst_a');
    r.answer(r.at('o.test')[3]);
    expect(r.at('o.test').map((s) => s.id)).toEqual(['a1', 'b1', 'a2', 'a3', 'b2', 'a4']);
    expect(r.at('o.test').filter((s) => s.id.startsWith('b')).length).toBe(2);
    for (const s of r.at('p.test')) r.answer(s);
    r.answer(r.at('o.test')[5]);
    r.answer(r.at('o.test')[4]);
    expect(r.at('o.test').map((s) => s.id)).toEqual(['a1', 'b1', 'a2', 'a3', 'b2', 'a4', 'b3']);
    expect(r.pipeline.held()).toBe(1); // b3, in flight at the ordered webhook
    r.answer(r.at('o.test')[6]);
    expect(r.pipeline.held()).toBe(0);
    expect(r.settled.sort()).toEqual(['a1', 'a2', 'a3', 'a4', 'b1', 'b2', 'b3']);
  });

  it('many keys go in parallel up to the webhook bound (8), each still one at a time', () => {
    const r = rig();
    for (let n = 1; n <= 3; n++) for (let k = 0; k < 20; k++) r.accept(`k${k}_${n}`, `inst_${k}`);
    const inFlight = () => r.at('o.test').length;
    expect(inFlight()).toBe(8);
    const seen = new Map<string, number>();
    // answer in flight ones until everything is done; per key the order of sending is 1, 2, 3
    for (let i = 0; i < r.at('o.test').length; i++) {
      const s = r.at('o.test')[i];
      const [key, n] = s.id.split('_');
      expect(Number(n), s.id).toBe((seen.get(key) ?? 0) + 1);
      seen.set(key, Number(n));
      r.answer(s);
    }
    expect([...seen.values()].every((n) => n === 3)).toBe(true);
    expect(seen.size).toBe(20);
  });

  it('deleting the webhook drops the attempts waiting behind a key, and the events settle', () => {
    const r = rig();
    r.registry.remove('org_a', 'wh_plain', 3);
    for (let i = 1; i <= 4; i++) r.accept(`a${i}`, 'inst_a');
    expect(r.at('o.test').map((s) => s.id)).toEqual(['a1']);
    r.registry.remove('org_a', 'wh_ordered', 4);
    expect(r.settled.sort()).toEqual(['a2', 'a3', 'a4']);
    r.answer(r.at('o.test')[0]);
    expect(r.settled.sort()).toEqual(['a1', 'a2', 'a3', 'a4']);
    expect(r.pipeline.held()).toBe(0);
  });

  it("an event still held for another webhook has its progress recorded before its key's next attempt starts", async () => {
    const saves: Array<{ ids: string[]; done: string[][]; resolve: () => void }> = [];
    const r = rig({
      save: (events) =>
        new Promise<void>((resolve) => saves.push({ ids: events.map((e) => e.event.id), done: events.map((e) => [...e.done]), resolve })),
    });
    r.accept('a1', 'inst_a');
    r.accept('a2', 'inst_a');
    expect(r.at('o.test').map((s) => s.id)).toEqual(['a1']);
    // a1 answered at the ordered webhook while the plain one still holds it: a2 waits for the record
    r.answer(r.at('o.test')[0]);
    expect(saves.map((s) => s.ids)).toEqual([['a1']]);
    expect(saves[0].done).toEqual([['wh_ordered']]);
    expect(r.at('o.test').map((s) => s.id)).toEqual(['a1']);
    saves[0].resolve();
    await new Promise<void>((res) => setImmediate(res));
    expect(r.at('o.test').map((s) => s.id)).toEqual(['a1', 'a2']);
    // an event that settles with its answer needs no record: the next goes at once
    r.answer(r.at('p.test')[0]);
    r.answer(r.at('p.test')[1]);
    r.accept('a3', 'inst_a');
    r.answer(r.at('o.test')[1]);
    expect(r.at('o.test').map((s) => s.id)).toEqual(['a1', 'a2', 'a3']);
  });
});
