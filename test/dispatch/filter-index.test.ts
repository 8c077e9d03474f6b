// Dispatch's index of filters (issue 54): WebhookRegistry.match refuses a filtered webhook unrun when
// the event does not hold its filter's indexed key, and answers exactly what each subscriber's `wants`
// answers, in the registry's order, whatever the webhooks' interests, match, filters, revisions, and
// however they change between events (the index is rebuilt after a change).
import { describe, expect, it } from 'vitest';
import { FilterIndex } from '../../src/dispatch/filter-index.ts';
import { WebhookRegistry } from '../../src/dispatch/registry.ts';
import { ParsedEvent, WebhookSubscriber } from '../../src/dispatch/subscriber.ts';
import type { EventFilter } from '../../src/domain/event-filter.ts';
import type { EventRoute } from '../../src/domain/event-route.ts';
import type { WebhookEntry } from '../../src/domain/webhook-entry.ts';
import { allEventsEntry } from '../helpers/webhooks.ts';

const ORG = 'org_1';
const INSTALLS = ['inst_a', 'inst_b', 'inst_c'];
const TYPES = ['com.svc.workflow.lifecycle.v1', 'com.svc.workflow_step.lifecycle.v1', 'com.svc.drift.v1'];

function random(seed: number): (n: number) => number {
  let a = seed;
  return (n) => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

describe('WebhookRegistry match with filters indexed', () => {
  it('answers as every subscriber’s wants, in order, over random webhooks, events and changes', () => {
    const rnd = random(54);
    const pick = <T>(xs: readonly T[]): T => xs[rnd(xs.length)];
    const filter = (): EventFilter | undefined => {
      const r = rnd(9);
      if (r === 0) return undefined;
      if (r === 1) return { data: { install_id: pick(INSTALLS) } };
      if (r === 2) return { data: { install_id: { $in: [pick(INSTALLS), pick(INSTALLS)] } }, type: { $in: TYPES.slice(0, 2) } };
      if (r === 3) return { type: pick(TYPES), data: { n: { $gt: rnd(4) } } };
      if (r === 4) return { $or: [{ type: pick(TYPES) }, { data: { install_id: pick(INSTALLS) } }] };
      if (r === 5) return { $and: [{ data: { install_id: { $eq: pick(INSTALLS) } } }, { data: { n: { $lt: 2 } } }] };
      if (r === 6) return { data: { install_id: { $neq: pick(INSTALLS) }, tags: { $contains: pick(['x', 'y']) } } };
      if (r === 7) return { data: { n: pick([0, 1, 2, null]) } };
      return {};
    };
    const entry = (i: number): WebhookEntry => {
      const f = filter();
      return {
        ...allEventsEntry(ORG, `wh_${i}`, `https://example.com/${i}`),
        match: rnd(4) === 0 ? { installs: { ids: [pick(INSTALLS)] } } : null,
        ...(f ? { filter: f } : {}),
        ...(rnd(6) === 0 ? { since_rev: 1 + rnd(5) } : {}),
        ...(rnd(10) === 0 ? { disabled: true as const } : {}),
      };
    };
    const r = new WebhookRegistry();
    // the registry's order: a Map's (a replaced webhook keeps its place, a removed one re-added goes last)
    const held = new Map<string, WebhookSubscriber>();
    const put = (e: WebhookEntry) => {
      r.upsert(e);
      held.set(e.webhook_id, new WebhookSubscriber(e));
    };
    for (let i = 0; i < 80; i++) put(entry(i));
    let delivered = 0;
    let examined = 0;
    for (let n = 0; n < 1500; n++) {
      if (n % 50 === 49) {
        // a change between events: a webhook replaced, one removed, one added
        put(entry(rnd(80)));
        const gone = `wh_${rnd(80)}`;
        r.remove(ORG, gone);
        held.delete(gone);
        put(entry(rnd(120)));
      }
      const install = pick(INSTALLS);
      const route: EventRoute = {
        org: ORG,
        type: pick(TYPES),
        resource: 'installs',
        op: 'provision',
        event: 'lifecycle.started',
        install: { id: install, labels: {} },
        component: null,
        action: null,
        rev: rnd(7),
      };
      const data: Record<string, unknown> = { install_id: rnd(8) ? install : pick([null, 3, { id: install }]) };
      if (rnd(3)) data.n = rnd(4);
      if (rnd(2)) data.tags = ['x', 'z'].slice(0, 1 + rnd(2));
      const r2 = rnd(25);
      const body = r2 === 0 ? undefined : r2 === 1 ? '{not json' : JSON.stringify({ type: route.type, data });
      const got = r.match(route, body).map((s) => s.id);
      const parsed = body === undefined ? undefined : new ParsedEvent(body);
      const want = [...held.values()]
        .filter((s) => (route.rev === 0 || (s.entry.since_rev ?? 0) <= route.rev) && s.wants(route, parsed))
        .map((s) => s.id);
      expect(got, JSON.stringify({ n, route, body })).toEqual(want);
      delivered += got.length;
      examined += held.size;
    }
    // neither everything nor nothing
    expect(delivered).toBeGreaterThan(examined * 0.05);
    expect(delivered).toBeLessThan(examined * 0.6);
  });

  it('indexes each filter by its key fewest other filters of the org share (one install, not the common type)', () => {
    const subs = Array.from({ length: 30 }, (_, i) => {
      const u = `u${i}`;
      return new WebhookSubscriber({
        ...allEventsEntry(ORG, `wh_${i}`, 'https://example.com/'),
        filter: {
          type: { $in: [TYPES[0], TYPES[1], u] },
          data: {
            org_id: { $in: [ORG, u] },
            $or: [{ kind: 'workflow' }, { kind: u }],
            workflow: { id: { $neq: u }, owner_id: { $in: [INSTALLS[i % 3], u] } },
          },
        },
      });
    });
    const plain = new WebhookSubscriber(allEventsEntry(ORG, 'wh_plain', 'https://example.com/'));
    const index = new FilterIndex([...subs, plain]);
    expect(index.paths).toEqual([['data', 'workflow', 'owner_id']]);
    expect(index.entries.map((e) => e.sub.id)).toEqual([...subs.map((s) => s.id), 'wh_plain']);
    expect([...index.entries[4].values]).toEqual([INSTALLS[1], 'u4']);
    expect(index.entries[30].slot).toBe(-1);
  });
});
