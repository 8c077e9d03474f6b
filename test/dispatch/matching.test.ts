// Interests filter and match predicate against events (spec 2.2, 2.3; CONTRACT 6.2, 6.3).
import { describe, expect, it } from 'vitest';
import { interestsAdmit, type RoutedEvent } from '../../src/dispatch/interests.ts';
import { matchAdmits, type Entity, type EventEntities } from '../../src/dispatch/match.ts';
import type { Interests, Match, ResourceConfig } from '../../src/domain/subscription.ts';

const lc = (resource: string, op: string, transition: string): RoutedEvent => ({ resource, op, event: `lifecycle.${transition}` });
const only = (resource: string, cfg: ResourceConfig): Interests => ({ resources: { [resource]: cfg } });

describe('interestsAdmit: all_events and resource gating', () => {
  const events: RoutedEvent[] = [
    lc('installs', 'provision', 'started'),
    lc('app_branches', 'run', 'failed'),
    { resource: 'components', op: 'drift', event: 'drift.detected' },
    { resource: 'runners', op: 'inactive', event: 'runner.inactive' },
    { resource: 'installs', op: 'health', event: 'install.recovered' },
    { resource: 'stacks', op: 'version_active', event: 'approval.request' },
  ];

  it('all_events true admits every event', () => {
    for (const ev of events) expect(interestsAdmit({ all_events: true }, ev)).toBe(true);
  });

  it('a resource absent from resources admits none of its events', () => {
    const i: Interests = {
      resources: { sandboxes: { drift_detected: true, approval_requests: true, approval_responses: true } },
    };
    for (const ev of events) expect(interestsAdmit(i, ev), JSON.stringify(ev)).toBe(false);
  });

  it('all_events false with resources is just the resources', () => {
    const i: Interests = { all_events: false, resources: { installs: {} } };
    expect(interestsAdmit(i, lc('installs', 'provision', 'started'))).toBe(true);
    expect(interestsAdmit(i, lc('components', 'deploy', 'started'))).toBe(false);
  });

  it('empty documents (not valid, but stored legacy) admit nothing', () => {
    expect(interestsAdmit({}, lc('installs', 'provision', 'started'))).toBe(false);
    expect(interestsAdmit({ resources: {} }, lc('installs', 'provision', 'started'))).toBe(false);
  });

  it('inherited object keys are not resources', () => {
    expect(interestsAdmit({ resources: {} }, lc('constructor', 'x', 'started'))).toBe(false);
    expect(interestsAdmit({ resources: {} }, lc('__proto__', 'x', 'started'))).toBe(false);
  });
});

describe('interestsAdmit: lifecycle ops and outcome', () => {
  const transitions = ['started', 'succeeded', 'failed', 'cancelled'] as const;
  const expected: Record<string, Record<(typeof transitions)[number], boolean>> = {
    all: { started: true, succeeded: true, failed: true, cancelled: true },
    completion: { started: false, succeeded: true, failed: true, cancelled: true },
    failures: { started: false, succeeded: false, failed: true, cancelled: true },
    none: { started: false, succeeded: false, failed: false, cancelled: false },
  };

  for (const [outcome, row] of Object.entries(expected)) {
    for (const t of transitions) {
      it(`outcome ${outcome}, ${t} -> ${row[t]}`, () => {
        const i = only('components', { outcome: outcome as ResourceConfig['outcome'] });
        expect(interestsAdmit(i, lc('components', 'deploy', t))).toBe(row[t]);
      });
    }
  }

  it('omitted outcome means all', () => {
    for (const t of transitions) expect(interestsAdmit(only('installs', {}), lc('installs', 'deprovision', t))).toBe(true);
  });

  it('ops empty or omitted admit every op; otherwise only the listed ops', () => {
    for (const cfg of [{}, { ops: [] }]) {
      for (const op of ['provision', 'deprovision', 'reprovision'])
        expect(interestsAdmit(only('installs', cfg), lc('installs', op, 'succeeded'))).toBe(true);
    }
    const i = only('installs', { ops: ['provision', 'reprovision'] });
    expect(interestsAdmit(i, lc('installs', 'provision', 'succeeded'))).toBe(true);
    expect(interestsAdmit(i, lc('installs', 'reprovision', 'started'))).toBe(true);
    expect(interestsAdmit(i, lc('installs', 'deprovision', 'succeeded'))).toBe(false);
  });

  it('ops and outcome combine', () => {
    const i = only('sandboxes', { ops: ['deprovision'], outcome: 'failures' });
    expect(interestsAdmit(i, lc('sandboxes', 'deprovision', 'failed'))).toBe(true);
    expect(interestsAdmit(i, lc('sandboxes', 'deprovision', 'succeeded'))).toBe(false);
    expect(interestsAdmit(i, lc('sandboxes', 'provision', 'failed'))).toBe(false);
  });

  it('an unknown lifecycle transition is not admitted', () => {
    expect(interestsAdmit(only('installs', {}), lc('installs', 'provision', 'paused'))).toBe(false);
  });

  it('flags do not admit lifecycle events under outcome none', () => {
    const i = only('components', {
      outcome: 'none',
      drift_detected: true,
      component_health: true,
      approval_requests: true,
      approval_responses: true,
    });
    for (const t of transitions) expect(interestsAdmit(i, lc('components', 'deploy', t))).toBe(false);
  });
});

describe('interestsAdmit: runner events', () => {
  const unhealthy: RoutedEvent = { resource: 'runners', op: 'unhealthy', event: 'runner.unhealthy' };
  const inactive: RoutedEvent = { resource: 'runners', op: 'inactive', event: 'runner.inactive' };
  const cases: [ResourceConfig, boolean, boolean][] = [
    // cfg, unhealthy admitted, inactive admitted
    [{}, true, true],
    [{ ops: [] }, true, true],
    [{ ops: ['unhealthy'] }, true, false],
    [{ ops: ['inactive'] }, false, true],
    [{ ops: ['provision', 'reprovision'] }, false, false],
    [{ outcome: 'all' }, true, true],
    [{ outcome: 'completion' }, true, true],
    [{ outcome: 'failures' }, true, false],
    [{ outcome: 'none' }, false, false],
    [{ ops: ['unhealthy', 'inactive'], outcome: 'failures' }, true, false],
    [{ ops: ['inactive'], outcome: 'none' }, false, false],
  ];
  it.each(cases.map(([cfg, u, i]) => [JSON.stringify(cfg), cfg, u, i] as const))('runners %s', (_l, cfg, u, i) => {
    expect(interestsAdmit(only('runners', cfg), unhealthy)).toBe(u);
    expect(interestsAdmit(only('runners', cfg), inactive)).toBe(i);
  });

  it('runner lifecycle events follow ops and outcome', () => {
    const i = only('runners', { ops: ['provision'], outcome: 'completion' });
    expect(interestsAdmit(i, lc('runners', 'provision', 'succeeded'))).toBe(true);
    expect(interestsAdmit(i, lc('runners', 'provision', 'started'))).toBe(false);
    expect(interestsAdmit(i, lc('runners', 'reprovision', 'succeeded'))).toBe(false);
  });
});

describe('interestsAdmit: flag-gated events', () => {
  const request = (r: string): RoutedEvent => ({ resource: r, op: 'x', event: 'approval.request' });
  const approved = (r: string): RoutedEvent => ({ resource: r, op: 'x', event: 'approval.response.approved' });
  const rejected = (r: string): RoutedEvent => ({ resource: r, op: 'x', event: 'approval.response.rejected' });

  it('approval requests and responses need their own booleans, independent of outcome and ops', () => {
    const req = only('app_branches', { approval_requests: true, outcome: 'none', ops: ['run'] });
    expect(interestsAdmit(req, request('app_branches'))).toBe(true);
    expect(interestsAdmit(req, approved('app_branches'))).toBe(false);
    expect(interestsAdmit(req, rejected('app_branches'))).toBe(false);
    const resp = only('installs', { approval_responses: true, outcome: 'none' });
    expect(interestsAdmit(resp, request('installs'))).toBe(false);
    expect(interestsAdmit(resp, approved('installs'))).toBe(true);
    expect(interestsAdmit(resp, rejected('installs'))).toBe(true);
    const off = only('installs', { approval_requests: false, approval_responses: false });
    expect(interestsAdmit(off, request('installs'))).toBe(false);
    expect(interestsAdmit(off, approved('installs'))).toBe(false);
    // outcome all does not imply approvals
    expect(interestsAdmit(only('installs', { outcome: 'all' }), request('installs'))).toBe(false);
  });

  it('drift needs drift_detected on components or sandboxes', () => {
    const drift = (r: string): RoutedEvent => ({ resource: r, op: 'drift', event: 'drift.detected' });
    expect(interestsAdmit(only('components', { drift_detected: true, outcome: 'none' }), drift('components'))).toBe(true);
    expect(interestsAdmit(only('sandboxes', { drift_detected: true }), drift('sandboxes'))).toBe(true);
    expect(interestsAdmit(only('components', {}), drift('components'))).toBe(false);
    expect(interestsAdmit(only('components', { drift_detected: false }), drift('components'))).toBe(false);
    expect(interestsAdmit(only('components', { component_health: true }), drift('components'))).toBe(false);
    expect(interestsAdmit(only('installs', { drift_detected: true }), drift('installs'))).toBe(false);
  });

  it('component health needs component_health on components (both directions)', () => {
    for (const t of ['unhealthy', 'recovered']) {
      const ev: RoutedEvent = { resource: 'components', op: 'health', event: `component.${t}` };
      expect(interestsAdmit(only('components', { component_health: true, outcome: 'none' }), ev)).toBe(true);
      expect(interestsAdmit(only('components', { drift_detected: true }), ev)).toBe(false);
      expect(interestsAdmit(only('components', {}), ev)).toBe(false);
      expect(interestsAdmit(only('installs', { install_degraded: true }), ev)).toBe(false);
    }
  });

  it('install health needs install_degraded on installs (both directions)', () => {
    for (const t of ['degraded', 'recovered']) {
      const ev: RoutedEvent = { resource: 'installs', op: 'health', event: `install.${t}` };
      expect(interestsAdmit(only('installs', { install_degraded: true, outcome: 'none', ops: ['provision'] }), ev)).toBe(true);
      expect(interestsAdmit(only('installs', {}), ev)).toBe(false);
      expect(interestsAdmit(only('components', { component_health: true }), ev)).toBe(false);
    }
  });

  it('ping and unknown events are admitted only by all_events', () => {
    const ping: RoutedEvent = { resource: '', op: '', event: 'webhook.ping' };
    const odd: RoutedEvent = { resource: 'installs', op: 'provision', event: 'something.else' };
    expect(interestsAdmit(only('installs', {}), ping)).toBe(false);
    expect(interestsAdmit(only('installs', {}), odd)).toBe(false);
    expect(interestsAdmit({ all_events: true }, odd)).toBe(true);
  });
});

describe('matchAdmits', () => {
  const inst = (id: string, labels: Record<string, string> | null = {}): Entity => ({ id, labels });
  const prodInstall: EventEntities = { install: inst('inst_1', { env: 'prod', team: 'core' }) };
  const full: EventEntities = {
    install: inst('inst_1', { env: 'prod' }),
    component: inst('cmp_1', { tier: 'web' }),
    action: inst('act_1', { kind: 'ops' }),
  };

  it('null match admits everything, even events with no entities', () => {
    expect(matchAdmits(null, {})).toBe(true);
    expect(matchAdmits(null, full)).toBe(true);
  });

  it('{} for a kind admits any entity of that kind, but never an event without one', () => {
    expect(matchAdmits({ installs: {} }, prodInstall)).toBe(true);
    expect(matchAdmits({ installs: {} }, { install: inst('x', null) })).toBe(true);
    expect(matchAdmits({ installs: {} }, {})).toBe(false);
    expect(matchAdmits({ installs: {} }, { install: null })).toBe(false);
    expect(matchAdmits({ components: {} }, prodInstall)).toBe(false);
    expect(matchAdmits({ actions: {} }, { install: full.install, component: full.component })).toBe(false);
  });

  it('ids match by membership', () => {
    const m: Match = { installs: { ids: ['inst_0', 'inst_1'] } };
    expect(matchAdmits(m, prodInstall)).toBe(true);
    expect(matchAdmits(m, { install: inst('inst_2', { env: 'prod' }) })).toBe(false);
    // an id of another kind does not count
    expect(matchAdmits({ components: { ids: ['inst_1'] } }, prodInstall)).toBe(false);
  });

  it('selector: every label must match (AND); * requires only the key', () => {
    expect(matchAdmits({ installs: { selector: { match_labels: { env: 'prod' } } } }, prodInstall)).toBe(true);
    expect(matchAdmits({ installs: { selector: { match_labels: { env: 'prod', team: 'core' } } } }, prodInstall)).toBe(true);
    expect(matchAdmits({ installs: { selector: { match_labels: { env: 'prod', team: 'edge' } } } }, prodInstall)).toBe(false);
    expect(matchAdmits({ installs: { selector: { match_labels: { env: 'dev' } } } }, prodInstall)).toBe(false);
    expect(matchAdmits({ installs: { selector: { match_labels: { env: '*' } } } }, prodInstall)).toBe(true);
    expect(matchAdmits({ installs: { selector: { match_labels: { region: '*' } } } }, prodInstall)).toBe(false);
    expect(matchAdmits({ installs: { selector: { match_labels: { env: '*', team: 'core' } } } }, prodInstall)).toBe(true);
    // an empty-valued label is present for '*', and equal only to ''
    expect(matchAdmits({ installs: { selector: { match_labels: { flag: '*' } } } }, { install: inst('i', { flag: '' }) })).toBe(true);
    expect(matchAdmits({ installs: { selector: { match_labels: { flag: 'x' } } } }, { install: inst('i', { flag: '' }) })).toBe(false);
  });

  it('labels are own keys only', () => {
    const m = (k: string): Match => ({ installs: { selector: { match_labels: { [k]: '*' } } } });
    expect(matchAdmits(m('constructor'), { install: inst('i', {}) })).toBe(false);
    expect(matchAdmits(m('toString'), { install: inst('i', {}) })).toBe(false);
  });

  it('ids OR selector within a kind', () => {
    const m: Match = { installs: { ids: ['inst_9'], selector: { match_labels: { env: 'prod' } } } };
    expect(matchAdmits(m, prodInstall)).toBe(true); // by labels
    expect(matchAdmits(m, { install: inst('inst_9', { env: 'dev' }) })).toBe(true); // by id
    expect(matchAdmits(m, { install: inst('inst_8', { env: 'dev' }) })).toBe(false);
  });

  it('unknown labels (null) match by id only', () => {
    const bySel: Match = { installs: { selector: { match_labels: { env: '*' } } } };
    expect(matchAdmits(bySel, { install: inst('inst_1', null) })).toBe(false);
    const both: Match = { installs: { ids: ['inst_1'], selector: { match_labels: { env: '*' } } } };
    expect(matchAdmits(both, { install: inst('inst_1', null) })).toBe(true);
    expect(matchAdmits(both, { install: inst('inst_2', null) })).toBe(false);
  });

  it('any populated kind matching is enough (OR across kinds)', () => {
    const m: Match = {
      installs: { ids: ['inst_other'] },
      components: { selector: { match_labels: { tier: 'web' } } },
      actions: { ids: ['act_other'] },
    };
    expect(matchAdmits(m, full)).toBe(true); // by component
    expect(matchAdmits(m, { install: full.install, action: full.action })).toBe(false);
    expect(matchAdmits(m, { install: inst('inst_other', null) })).toBe(true);
    expect(matchAdmits(m, { action: inst('act_other', null) })).toBe(true);
    expect(matchAdmits({ actions: { selector: { match_labels: { kind: 'ops' } } } }, full)).toBe(true);
  });

  it('a match naming no kind admits nothing', () => {
    expect(matchAdmits({}, full)).toBe(false);
  });
});
