// The event kinds registry (src/events/kinds/, issue 50): one entry per kind, each entry's data
// schema describes the data ceData builds for its kind, and (type level) a kind left out of the
// registry does not compile.
import { describe, it, expect } from 'vitest';
import type { Fact } from '../../src/domain/facts.ts';
import { ceData, toCloudEvent } from '../../src/events/cloudevent.ts';
import { KINDS, kindOf, type EventKind, type EventKinds } from '../../src/events/kinds/index.ts';

// Type-level: KINDS is a Record over every Fact['kind'] (EventKinds is a mapped type over the
// union), so a missing kind is a compile error naming it (tsc --noEmit checks test/ too).
const asRecord: Record<Fact['kind'], EventKind> = KINDS;
const { webhook_ping: _left, ...withoutPing } = KINDS;
// @ts-expect-error Property 'webhook_ping' is missing
const missing: EventKinds = withoutPing;
void asRecord;
void missing;

const TIME = '2024-05-06T07:08:09.123Z';
const base = { org_id: 'org_1', time: TIME };
const wf = { id: 'wf_1', type: 'provision', owner_id: 'inst_1', owner_type: 'installs' as const };
const step = { id: 'st_1', name: 'plan', idx: 2, execution_type: 'system' as const };
const RUNNER = { id: 'rnr_1', name: 'r', group_id: 'rg_1', group_type: 'install' };

/** The least and the most of each kind's data. */
const FACTS: Fact[] = [
  { ...base, kind: 'workflow', transition: 'started', workflow: wf },
  {
    ...base,
    kind: 'workflow',
    transition: 'failed',
    workflow: { ...wf, type: 'app_branch_run', parent: { workflow_id: 'wf_0', step_id: 'st_0', kind: 'workflow_step' } },
    action: { id: 'act_1', name: 'a' },
    outcome: { status: 'failed', duration_ms: 3 },
    rollout: {
      run_id: 'r',
      trigger: 'health_gate',
      install_id: 'i',
      component_id: 'c',
      verdict: 'degraded',
      reason: null,
      failed_installs: [],
      install_ids: [],
      next_window_at: null,
      window_ids: [],
    },
  },
  { ...base, kind: 'workflow_step', transition: 'started', workflow: wf, step },
  {
    ...base,
    kind: 'workflow_step',
    transition: 'succeeded',
    workflow: wf,
    step: { ...step, target_type: 'install_deploys', target_id: 'd', component_id: 'c', sandbox_id: 's' },
    outcome: { status: 'succeeded', duration_ms: 9 },
    rollout: { run_id: 'r', failed_installs: [{ install_id: 'i', workflow_id: 'w', error: 'e' }] },
  },
  {
    ...base,
    kind: 'workflow_step_approval',
    transition: 'requested',
    workflow: wf,
    step,
    approval: { status: 'requested', plan: { a: [1] } },
  },
  {
    ...base,
    kind: 'workflow_step_approval',
    transition: 'requested',
    workflow: wf,
    step,
    approval: { status: 'requested', plan: 'x'.repeat(70_000) },
  },
  {
    ...base,
    kind: 'workflow_step_approval',
    transition: 'rejected',
    workflow: wf,
    step,
    approval: { status: 'rejected', note: 'no', responded_at: TIME, responded_by: { token_id: null, token_name: 'local' } },
  },
  {
    ...base,
    kind: 'drift_detected',
    transition: 'detected',
    workflow: { ...wf, type: 'drift_run' },
    step,
    install_id: 'inst_1',
    drift: { changes: [] },
  },
  {
    ...base,
    kind: 'drift_detected',
    transition: 'detected',
    workflow: { ...wf, type: 'drift_run' },
    step,
    install_id: 'inst_1',
    drift: { component_id: 'c', sandbox_id: 's', changes: [{ address: 'a', action: 'update' }] },
  },
  {
    ...base,
    kind: 'component_health',
    transition: 'recovered',
    install_id: 'inst_1',
    component_id: 'c',
    health: { verdict: 'healthy', previous: 'degraded' },
  },
  {
    ...base,
    kind: 'component_health',
    transition: 'unhealthy',
    install_id: 'inst_1',
    component_id: 'c',
    health: { verdict: 'unhealthy', previous: null, reason: 'r' },
  },
  {
    ...base,
    kind: 'install_health',
    transition: 'degraded',
    install_id: 'inst_1',
    health: { verdict: 'degraded', previous: null, component_id: 'c' },
  },
  { ...base, kind: 'runner_unhealthy', transition: 'unhealthy', runner: RUNNER, reason: 'gone', install_id: 'inst_1' },
  { ...base, kind: 'runner_inactive', transition: 'inactive', runner: RUNNER },
  { ...base, kind: 'webhook_ping', transition: 'ping', webhook_id: 'wh_1' },
  {
    ...base,
    kind: 'webhook_delivery',
    transition: 'failing',
    webhook: { id: 'wh_1', url_host: 'h' },
    delivery: { consecutive_failures: 1, failing_since: TIME, last_error: 'e', last_status_code: 500 },
  },
  {
    ...base,
    kind: 'webhook_delivery',
    transition: 'disabled',
    webhook: { id: 'wh_1', url_host: 'h' },
    delivery: {
      consecutive_failures: 1,
      failing_since: TIME,
      last_error: 'e',
      last_status_code: null,
      failed_events: 2,
      recover_since: null,
      disabled_reason: 'x',
    },
  },
];

describe('event kinds registry', () => {
  it('has one entry per kind, under its own name, with its own CloudEvents type', () => {
    for (const [name, k] of Object.entries(KINDS)) expect(k.kind).toBe(name);
    const types = Object.values(KINDS).map((k) => k.type);
    expect(new Set(types).size).toBe(types.length);
    for (const t of types) expect(t).toMatch(/^com\.svc\.[a-z_]+\.[a-z_]+\.v1$/);
    expect(new Set(FACTS.map((f) => f.kind)).size).toBe(Object.keys(KINDS).length);
  });

  it.each(FACTS.map((f, i) => [`${f.kind} ${f.transition} #${i}`, f] as const))(
    "the kind's data schema describes the data of %s",
    (_n, fact) => {
      const data = ceData(fact, 'https://dash.example.com');
      expect(kindOf(fact).data.schema.safeParse(data).error).toBeUndefined();
      // strict: a field the schema does not name is refused
      expect(kindOf(fact).data.schema.safeParse({ ...data, extra: 1 }).success).toBe(false);
      expect(
        toCloudEvent(fact, { source: '//a/ctl-api', baseUrl: 'https://a', dashboardUrl: 'https://dash.example.com', id: 'e' })?.data,
      ).toEqual(data);
    },
  );
});
