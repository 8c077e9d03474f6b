// The catalog's check of filter paths (CONTRACT 10.2): every catalog type says which routes it can
// have, the interests admit the types dispatch would deliver, and a path is known when an admitted
// type's JSON Schema has it (an open schema, such as an approval's plan, admits any path below it).
import { describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../src/events/catalog.ts';
import { KINDS } from '../../src/events/kinds/index.ts';
import { admittedTypes, filterProblems } from '../../src/services/filter-paths.ts';

describe('filter paths against the catalog', () => {
  it("each kind's routes hold the resource and slug of its example's event (a kind's routes are what its events can have)", () => {
    for (const kind of Object.values(KINDS)) {
      const fact = kind.catalog.example;
      const cls = kind.classify(fact as never);
      if (kind.direct) {
        expect(kind.routes, kind.type).toEqual({ resources: [], events: [] });
        continue;
      }
      expect(cls, kind.type).not.toBeNull();
      expect(kind.routes.resources, kind.type).toContain(cls!.resource);
      expect(kind.routes.events, kind.type).toContain(kind.slug(fact as never).replace(/^event:/, ''));
    }
    expect(EVENT_TYPES.get('com.svc.rollout.verification.v1')?.routes).toEqual({ resources: [], events: [] });
  });

  it('admitted types follow the interests', () => {
    const all = admittedTypes({ all_events: true });
    expect(all).not.toContain('com.svc.webhook.ping.v1');
    expect(all).toContain('com.svc.webhook.delivery.v1');
    // none given: the watchdog's events are not for it (CONTRACT 4.1)
    expect(admittedTypes({ all_events: true }, true)).not.toContain('com.svc.webhook.delivery.v1');
    expect(admittedTypes({ resources: { runners: { ops: ['unhealthy'] } } })).toEqual(['com.svc.runner.unhealthy.v1']);
    expect(admittedTypes({ resources: { components: { component_health: true, outcome: 'none' } } })).toEqual([
      'com.svc.component.health.v1',
    ]);
    expect(admittedTypes({ resources: { webhooks: { delivery_failing: true } } })).toEqual(['com.svc.webhook.delivery.v1']);
    const approvals = admittedTypes({ resources: { installs: { approval_requests: true, outcome: 'none' } } });
    expect(approvals).toEqual(['com.svc.workflow_step.approval.v1']);
  });

  it.each<[string, Record<string, unknown>, string | null]>([
    ['envelope attribute', { subject: { $startsWith: 'o' } }, null],
    ['extension attribute', { sequence: { $gt: '0' } }, null],
    ['unknown attribute', { subjectt: 'x' }, 'filter.subjectt'],
    ['data field', { data: { transition: 'failed' } }, null],
    ['below an open schema', { data: { approval: { plan: { a: { b: 1 } } } } }, null],
    ['under a string', { data: { transition: { x: 1 } } }, 'filter.data.transition.x'],
    ['array items', { interests: { $contains: 'event:lifecycle.failed' } }, null],
    ['fields of a string array element', { interests: { $contains: { x: 1 } } }, 'filter.interests.$contains.x'],
  ])('%s', (_n, filter, problem) => {
    const found = filterProblems(filter, { resources: { installs: { approval_requests: true } } });
    if (problem === null) expect(found).toEqual([]);
    else expect(found.map((d) => d.path)).toEqual([problem]);
  });
});
