import { describe, it, expect } from 'vitest';
import { CloudEvent as SdkCloudEvent } from 'cloudevents';
import type {
  ApprovalFact,
  ComponentHealthFact,
  DriftFact,
  Fact,
  InstallHealthFact,
  PingFact,
  RunnerInactiveFact,
  RunnerUnhealthyFact,
  StepFact,
  StepRef,
  WorkflowFact,
  WorkflowRef,
} from '../../src/domain/facts.ts';
import { classify } from '../../src/events/classify.ts';
import { slugsFor } from '../../src/events/slugs.ts';
import { linksFor } from '../../src/events/links.ts';
import { ceSubject, ceType, eventId, sourceFor, toCloudEvent, MAX_PLAN_BYTES, type CloudEvent } from '../../src/events/cloudevent.ts';

const ORG = 'org_1';
const INST = 'inst_1';
const TIME = '2024-05-06T07:08:09.123Z';
const DASH = 'https://dash.example.com';
const OPTS = { source: '//api.example.com:8443/ctl-api', baseUrl: 'https://api.example.com:8443', dashboardUrl: DASH };

const wfRef = (type: string, extra: Partial<WorkflowRef> = {}): WorkflowRef => ({
  id: 'wf_1',
  type,
  owner_id: INST,
  owner_type: 'installs',
  ...extra,
});
const stepRef = (extra: Partial<StepRef> = {}): StepRef => ({
  id: 'st_1',
  name: 'do thing',
  idx: 0,
  execution_type: 'system',
  ...extra,
});

function wfFact(type: string, transition: WorkflowFact['transition'] = 'started', extra: Partial<WorkflowFact> = {}): WorkflowFact {
  const f: WorkflowFact = { kind: 'workflow', transition, org_id: ORG, time: TIME, workflow: wfRef(type), ...extra };
  if (transition !== 'started' && !f.outcome) {
    f.outcome = { status: transition, duration_ms: 1234, ...(transition === 'failed' ? { error: 'boom' } : {}) };
  }
  return f;
}
function stepFact(
  type: string,
  step: Partial<StepRef> = {},
  transition: StepFact['transition'] = 'started',
  extra: Partial<StepFact> = {},
): StepFact {
  const f: StepFact = { kind: 'workflow_step', transition, org_id: ORG, time: TIME, workflow: wfRef(type), step: stepRef(step), ...extra };
  if (transition !== 'started' && !f.outcome) {
    f.outcome = { status: transition, duration_ms: 56, ...(transition === 'failed' ? { error: 'step boom' } : {}) };
  }
  return f;
}
function approvalFact(
  type: string,
  transition: Exclude<ApprovalFact['transition'], 'response_recorded'>,
  step: Partial<StepRef> = {},
  approval: Partial<ApprovalFact['approval']> = {},
  wf: Partial<WorkflowRef> = {},
): ApprovalFact {
  return {
    kind: 'workflow_step_approval',
    transition,
    org_id: ORG,
    time: TIME,
    workflow: wfRef(type, wf),
    step: stepRef({ execution_type: 'approval', ...step }),
    approval: { status: transition, ...approval },
  };
}
function driftFact(drift: DriftFact['drift'], type = 'drift_run', step: Partial<StepRef> = {}): DriftFact {
  return {
    kind: 'drift_detected',
    transition: 'detected',
    org_id: ORG,
    time: TIME,
    workflow: wfRef(type),
    step: stepRef({ name: 'plan api', target_type: 'install_deploys', component_id: drift.component_id ?? null, ...step }),
    install_id: INST,
    drift,
  };
}
const compHealth = (transition: ComponentHealthFact['transition'] = 'unhealthy'): ComponentHealthFact => ({
  kind: 'component_health',
  transition,
  org_id: ORG,
  time: TIME,
  install_id: INST,
  component_id: 'cmp_1',
  health:
    transition === 'unhealthy'
      ? { verdict: 'degraded', previous: null, reason: 'probe failed' }
      : { verdict: 'healthy', previous: 'degraded' },
});
const instHealth = (transition: InstallHealthFact['transition'] = 'degraded'): InstallHealthFact => ({
  kind: 'install_health',
  transition,
  org_id: ORG,
  time: TIME,
  install_id: INST,
  health: {
    verdict: transition === 'degraded' ? 'unhealthy' : 'healthy',
    previous: transition === 'degraded' ? 'healthy' : 'unhealthy',
    component_id: 'cmp_1',
  },
});
const RUNNER = { id: 'rnr_1', name: 'install runner', group_id: 'rg_1', group_type: 'install' };
const runnerUnhealthy = (install_id: string | null = INST): RunnerUnhealthyFact => ({
  kind: 'runner_unhealthy',
  transition: 'unhealthy',
  org_id: ORG,
  time: TIME,
  runner: RUNNER,
  reason: 'process missing',
  install_id,
});
const runnerInactive = (reason?: string): RunnerInactiveFact => ({
  kind: 'runner_inactive',
  transition: 'inactive',
  org_id: ORG,
  time: TIME,
  runner: RUNNER,
  install_id: INST,
  ...(reason ? { reason } : {}),
});
const ping: PingFact = { kind: 'webhook_ping', transition: 'ping', org_id: ORG, time: TIME, webhook_id: 'wh_1' };

/** Validates with the cloudevents SDK (strict: extension names, extension value types, the 1.0 schema). */
function sdkValidate(ev: CloudEvent): void {
  // The SDK accepts the array-valued `interests` extension as is (it counts as an object value).
  const sdk = new SdkCloudEvent({ ...ev } as unknown as ConstructorParameters<typeof SdkCloudEvent>[0], true);
  expect(sdk.validate()).toBe(true);
  expect(sdk.specversion).toBe('1.0');
  expect((sdk as unknown as Record<string, unknown>).interests).toEqual(ev.interests);
  for (const k of Object.keys(ev)) {
    expect(k, `attribute name ${k}`).toMatch(/^[a-z0-9]+$/);
    expect(k.length, `attribute name ${k}`).toBeLessThanOrEqual(20);
  }
}

function mustEvent(f: Fact, opts = OPTS): CloudEvent {
  const ev = toCloudEvent(f, opts);
  expect(ev, `${f.kind}/${f.transition} has an event`).not.toBeNull();
  sdkValidate(ev!);
  return ev!;
}

const ENVELOPE_KEYS = [
  'specversion',
  'id',
  'type',
  'source',
  'time',
  'subject',
  'datacontenttype',
  'dataschema',
  'svcorgid',
  'svckind',
  'svctransition',
  'interests',
  'data',
];

// ---------------------------------------------------------------- classification (CONTRACT 6.1)

describe('classify: workflow-level events by workflow type', () => {
  const rows: Array<[string, [string, string] | null]> = [
    ['provision', ['installs', 'provision']],
    ['deprovision', ['installs', 'deprovision']],
    ['reprovision', ['installs', 'reprovision']],
    ['manual_deploy', ['components', 'deploy']],
    ['deploy_components', ['components', 'deploy']],
    ['app_config_update', ['components', 'deploy']],
    ['teardown_component', ['components', 'teardown']],
    ['reprovision_sandbox', ['sandboxes', 'reprovision']],
    ['deprovision_sandbox', ['sandboxes', 'deprovision']],
    ['input_update', ['install_configurations', 'inputs']],
    ['sync_secrets', ['install_configurations', 'secrets']],
    ['action_workflow_run', ['actions', 'run']],
    ['provision_runner', ['runners', 'provision']],
    ['reprovision_runner', ['runners', 'reprovision']],
    ['app_branch_run', ['app_branches', 'run']],
    ['drift_run', null],
    ['drift_run_reprovision_sandbox', null],
    ['build', null],
    ['something_new', null],
    ['toString', null],
    ['', null],
  ];
  it.each(rows)('%s', (type, want) => {
    for (const t of ['started', 'succeeded', 'failed', 'cancelled'] as const) {
      expect(classify(wfFact(type, t))).toEqual(want ? { resource: want[0], op: want[1] } : null);
    }
  });
});

describe('classify: step events by target type then workflow type', () => {
  const rows: Array<[string, Partial<StepRef>, [string, string] | null]> = [
    // inside app_branch_run everything is app_branches/run
    ['app_branch_run', { name: 'plan install group: canary' }, ['app_branches', 'run']],
    ['app_branch_run', { name: 'deploy install group: canary', target_type: 'install_deploys' }, ['app_branches', 'run']],
    ['app_branch_run', { name: 'build components', target_type: 'runners' }, ['app_branches', 'run']],
    // install_sandbox_runs
    ['provision', { target_type: 'install_sandbox_runs' }, ['sandboxes', 'provision']],
    ['deprovision', { target_type: 'install_sandbox_runs' }, ['sandboxes', 'deprovision']],
    ['deprovision_sandbox', { target_type: 'install_sandbox_runs' }, ['sandboxes', 'deprovision']],
    ['reprovision', { target_type: 'install_sandbox_runs' }, ['sandboxes', 'reprovision']],
    ['reprovision_sandbox', { target_type: 'install_sandbox_runs' }, ['sandboxes', 'reprovision']],
    ['something_new', { target_type: 'install_sandbox_runs' }, ['sandboxes', 'reprovision']],
    // install_deploys
    ['provision', { name: 'deploy api', target_type: 'install_deploys' }, ['components', 'deploy']],
    ['manual_deploy', { name: 'deploy api', target_type: 'install_deploys' }, ['components', 'deploy']],
    ['app_config_update', { name: 'deploy api', target_type: 'install_deploys' }, ['components', 'deploy']],
    ['reprovision', { name: 'teardown api', target_type: 'install_deploys' }, ['components', 'teardown']],
    ['deploy_components', { name: 'teardown old', target_type: 'install_deploys' }, ['components', 'teardown']],
    ['teardown_component', { name: 'remove api', target_type: 'install_deploys' }, ['components', 'teardown']],
    ['deprovision', { name: 'destroy api', target_type: 'install_deploys' }, ['components', 'teardown']],
    ['provision', { name: 'teardownish api', target_type: 'install_deploys' }, ['components', 'deploy']],
    // other target types
    ['action_workflow_run', { target_type: 'install_action_workflow_runs' }, ['actions', 'run']],
    ['provision', { target_type: 'install_action_workflow_runs' }, ['actions', 'run']],
    ['provision', { target_type: 'install_stack_versions' }, ['stacks', 'version_active']],
    ['reprovision', { target_type: 'install_stack_versions' }, ['stacks', 'version_active']],
    ['provision', { target_type: 'runners' }, ['runners', 'provision']],
    ['provision_runner', { target_type: 'runners' }, ['runners', 'provision']],
    ['reprovision_runner', { target_type: 'runners' }, ['runners', 'reprovision']],
    ['reprovision', { target_type: 'runners' }, ['runners', 'reprovision']],
    ['deprovision', { target_type: 'runners' }, ['runners', 'reprovision']],
    // no or another target type: the workflow's classification
    ['sync_secrets', { name: 'sync secrets' }, ['install_configurations', 'secrets']],
    ['input_update', { name: 'update inputs', target_type: null }, ['install_configurations', 'inputs']],
    ['provision', { target_type: 'something_else' }, ['installs', 'provision']],
    ['teardown_component', { target_type: 'install_builds' }, ['components', 'teardown']],
    // unknown workflow type: steps classify by target type only
    ['something_new', { target_type: 'install_deploys', name: 'deploy api' }, ['components', 'deploy']],
    ['something_new', { target_type: 'install_stack_versions' }, ['stacks', 'version_active']],
    ['something_new', {}, null],
    ['something_new', { target_type: 'whatever' }, null],
    // drift workflows: never, whatever the target type
    ['drift_run', { target_type: 'install_deploys', name: 'plan api' }, null],
    ['drift_run', {}, null],
    ['drift_run_reprovision_sandbox', { target_type: 'install_sandbox_runs' }, null],
  ];
  it.each(rows)('%s %j', (type, step, want) => {
    const expected = want ? { resource: want[0], op: want[1] } : null;
    for (const t of ['started', 'succeeded', 'failed', 'cancelled'] as const) expect(classify(stepFact(type, step, t))).toEqual(expected);
    // approvals classify like the step they are about
    for (const t of ['requested', 'approved', 'rejected'] as const) expect(classify(approvalFact(type, t, step))).toEqual(expected);
  });
});

describe('classify: other kinds', () => {
  it('drift: components/drift or sandboxes/drift, even inside drift workflows', () => {
    expect(classify(driftFact({ component_id: 'cmp_1', changes: [{ address: 'a', action: 'update' }] }))).toEqual({
      resource: 'components',
      op: 'drift',
    });
    expect(
      classify(
        driftFact({ sandbox_id: 'sbx_1', changes: [{ address: 'a', action: 'delete' }] }, 'drift_run_reprovision_sandbox', {
          target_type: 'install_sandbox_runs',
          sandbox_id: 'sbx_1',
          component_id: null,
        }),
      ),
    ).toEqual({ resource: 'sandboxes', op: 'drift' });
  });
  it('health, runners, ping', () => {
    expect(classify(compHealth())).toEqual({ resource: 'components', op: 'health' });
    expect(classify(compHealth('recovered'))).toEqual({ resource: 'components', op: 'health' });
    expect(classify(instHealth())).toEqual({ resource: 'installs', op: 'health' });
    expect(classify(runnerUnhealthy())).toEqual({ resource: 'runners', op: 'unhealthy' });
    expect(classify(runnerInactive())).toEqual({ resource: 'runners', op: 'inactive' });
    expect(classify(ping)).toBeNull();
  });
});

// ---------------------------------------------------------------- slugs (CONTRACT 6.2, spec 6.4)

describe('slugs', () => {
  const s = (f: Fact) => slugsFor(f, classify(f));
  it('lifecycle: resource, op, event, outcome slugs', () => {
    expect(s(wfFact('provision', 'started'))).toEqual(['resource:installs', 'op:installs.provision', 'event:lifecycle.started']);
    expect(s(wfFact('provision', 'succeeded'))).toEqual([
      'resource:installs',
      'op:installs.provision',
      'event:lifecycle.succeeded',
      'outcome:completion',
    ]);
    expect(s(wfFact('action_workflow_run', 'failed'))).toEqual([
      'resource:actions',
      'op:actions.run',
      'event:lifecycle.failed',
      'outcome:completion',
      'outcome:failures',
    ]);
    expect(s(stepFact('provision', { target_type: 'runners' }, 'cancelled'))).toEqual([
      'resource:runners',
      'op:runners.provision',
      'event:lifecycle.cancelled',
      'outcome:completion',
      'outcome:failures',
    ]);
    expect(s(stepFact('provision', { target_type: 'install_sandbox_runs' }, 'succeeded'))).toEqual([
      'resource:sandboxes',
      'op:sandboxes.provision',
      'event:lifecycle.succeeded',
      'outcome:completion',
    ]);
  });
  it('approvals', () => {
    expect(s(approvalFact('app_branch_run', 'requested'))).toEqual([
      'resource:app_branches',
      'op:app_branches.run',
      'event:approval.request',
    ]);
    expect(s(approvalFact('app_branch_run', 'approved'))).toEqual([
      'resource:app_branches',
      'op:app_branches.run',
      'event:approval.response.approved',
    ]);
    expect(s(approvalFact('manual_deploy', 'rejected', { target_type: 'install_deploys', name: 'deploy api' }))).toEqual([
      'resource:components',
      'op:components.deploy',
      'event:approval.response.rejected',
    ]);
  });
  it('drift, health, runners', () => {
    expect(s(driftFact({ component_id: 'cmp_1', changes: [] }))).toEqual([
      'resource:components',
      'op:components.drift',
      'event:drift.detected',
    ]);
    expect(s(driftFact({ sandbox_id: 'sbx_1', changes: [] }, 'drift_run_reprovision_sandbox'))).toEqual([
      'resource:sandboxes',
      'op:sandboxes.drift',
      'event:drift.detected',
    ]);
    expect(s(compHealth('unhealthy'))).toEqual(['resource:components', 'op:components.health', 'event:component.unhealthy']);
    expect(s(compHealth('recovered'))).toEqual(['resource:components', 'op:components.health', 'event:component.recovered']);
    expect(s(instHealth('degraded'))).toEqual(['resource:installs', 'op:installs.health', 'event:install.degraded']);
    expect(s(instHealth('recovered'))).toEqual(['resource:installs', 'op:installs.health', 'event:install.recovered']);
    expect(s(runnerUnhealthy())).toEqual([
      'resource:runners',
      'op:runners.unhealthy',
      'event:runner.unhealthy',
      'outcome:completion',
      'outcome:failures',
    ]);
    expect(s(runnerInactive())).toEqual(['resource:runners', 'op:runners.inactive', 'event:runner.inactive']);
  });
  it('ping carries event:webhook.ping alone', () => {
    expect(s(ping)).toEqual(['event:webhook.ping']);
    expect(slugsFor(ping, null)).toEqual(['event:webhook.ping']);
  });
});

// ---------------------------------------------------------------- links (CONTRACT 6.2)

describe('links', () => {
  const I = `${DASH}/${ORG}/installs/${INST}`;
  it('workflow of an install: org, install, workflow', () => {
    expect(linksFor(wfFact('provision'), DASH)).toEqual({ org: `${DASH}/${ORG}`, install: I, workflow: `${DASH}/${ORG}/workflows/wf_1` });
  });
  it('trailing slashes of the dashboard URL do not double up; a path prefix is kept', () => {
    expect(linksFor(wfFact('provision'), `${DASH}//`).org).toBe(`${DASH}/${ORG}`);
    expect(linksFor(wfFact('provision'), `${DASH}/ui/`).workflow).toBe(`${DASH}/ui/${ORG}/workflows/wf_1`);
  });
  it('sandbox and component steps', () => {
    expect(linksFor(stepFact('provision', { target_type: 'install_sandbox_runs', sandbox_id: 'sbx_1' }), DASH)).toEqual({
      org: `${DASH}/${ORG}`,
      install: I,
      workflow: `${DASH}/${ORG}/workflows/wf_1`,
      sandbox: `${I}/sandbox`,
    });
    expect(linksFor(stepFact('provision', { target_type: 'install_deploys', component_id: 'cmp_9' }), DASH)).toEqual({
      org: `${DASH}/${ORG}`,
      install: I,
      workflow: `${DASH}/${ORG}/workflows/wf_1`,
      component: `${I}/components/cmp_9`,
    });
  });
  it('non-install owner: install from the fact scope, or none', () => {
    const f = stepFact('app_config_update', { target_type: 'install_deploys', component_id: 'cmp_1' });
    f.workflow = wfRef('app_branch_run', { owner_type: 'app_branches', owner_id: 'br_1' });
    expect(linksFor(f, DASH)).toEqual({ org: `${DASH}/${ORG}`, workflow: `${DASH}/${ORG}/workflows/wf_1` });
    f.install_id = 'inst_7';
    expect(linksFor(f, DASH)).toEqual({
      org: `${DASH}/${ORG}`,
      install: `${DASH}/${ORG}/installs/inst_7`,
      workflow: `${DASH}/${ORG}/workflows/wf_1`,
      component: `${DASH}/${ORG}/installs/inst_7/components/cmp_1`,
    });
  });
  it('health, drift, runner and ping events', () => {
    expect(linksFor(compHealth(), DASH)).toEqual({ org: `${DASH}/${ORG}`, install: I, component: `${I}/components/cmp_1` });
    expect(linksFor(instHealth(), DASH)).toEqual({ org: `${DASH}/${ORG}`, install: I });
    expect(
      linksFor(
        driftFact({ sandbox_id: 'sbx_1', changes: [] }, 'drift_run_reprovision_sandbox', {
          target_type: 'install_sandbox_runs',
          component_id: null,
        }),
        DASH,
      ),
    ).toEqual({ org: `${DASH}/${ORG}`, install: I, workflow: `${DASH}/${ORG}/workflows/wf_1`, sandbox: `${I}/sandbox` });
    expect(linksFor(runnerUnhealthy(), DASH)).toEqual({ org: `${DASH}/${ORG}`, install: I });
    expect(linksFor(runnerUnhealthy(null), DASH)).toEqual({ org: `${DASH}/${ORG}` });
    expect(linksFor(ping, DASH)).toEqual({ org: `${DASH}/${ORG}` });
  });
});

// ---------------------------------------------------------------- envelope: types, subjects, data

describe('envelope', () => {
  it('sourceFor: authority of the base URL', () => {
    expect(sourceFor('http://127.0.0.1:8080')).toBe('//127.0.0.1:8080/ctl-api');
    expect(sourceFor('https://api.example.com/some/path/')).toBe('//api.example.com/ctl-api');
    expect(sourceFor('http://[::1]:9000')).toBe('//[::1]:9000/ctl-api');
  });

  it('types and subjects of every kind', () => {
    const rows: Array<[Fact, string, string]> = [
      [wfFact('provision', 'succeeded'), 'com.svc.workflow.lifecycle.v1', `${ORG}/workflow/wf_1/succeeded`],
      [stepFact('provision', {}, 'failed'), 'com.svc.workflow_step.lifecycle.v1', `${ORG}/workflow_step/wf_1/st_1/failed`],
      [
        approvalFact('app_branch_run', 'requested'),
        'com.svc.workflow_step.approval.v1',
        `${ORG}/workflow_step_approval/wf_1/st_1/requested`,
      ],
      [driftFact({ component_id: 'cmp_1', changes: [] }), 'com.svc.drift.detected.v1', `${ORG}/drift_detected/wf_1/st_1/detected`],
      [compHealth('recovered'), 'com.svc.component.health.v1', `${ORG}/component_health/${INST}/cmp_1/recovered`],
      [instHealth('degraded'), 'com.svc.install.health.v1', `${ORG}/install_health/${INST}/degraded`],
      [runnerUnhealthy(), 'com.svc.runner.unhealthy.v1', `${ORG}/runner_unhealthy/rnr_1/unhealthy`],
      [runnerInactive(), 'com.svc.runner.inactive.v1', `${ORG}/runner_inactive/rnr_1/inactive`],
      [ping, 'com.svc.webhook.ping.v1', `${ORG}/webhook_ping/wh_1/ping`],
    ];
    for (const [f, type, subject] of rows) {
      expect(ceType(f)).toBe(type);
      expect(ceSubject(f)).toBe(subject);
      const ev = mustEvent(f);
      expect(ev.type).toBe(type);
      expect(ev.subject).toBe(subject);
      expect(Object.keys(ev)).toEqual(ENVELOPE_KEYS);
      expect(ev.specversion).toBe('1.0');
      expect(ev.datacontenttype).toBe('application/json');
      expect(ev.source).toBe(OPTS.source);
      expect(ev.time).toBe(TIME);
      expect(ev.svcorgid).toBe(ev.data.org_id);
      expect(ev.svckind).toBe(ev.data.kind);
      expect(ev.svctransition).toBe(ev.data.transition);
      expect(ev.svckind).toBe(f.kind);
      expect(ev.svctransition).toBe(f.transition);
      expect(ev.interests).toEqual(slugsFor(f, classify(f)));
      const dk = Object.keys(ev.data);
      expect(dk.slice(0, 3)).toEqual(['kind', 'transition', 'org_id']);
      expect(dk[dk.length - 1]).toBe('links');
      expect(ev.data.links).toEqual(linksFor(f, DASH));
      // no undefined values anywhere: the JSON round trip is lossless
      expect(JSON.parse(JSON.stringify(ev))).toEqual(ev);
    }
  });

  it('ids: fresh and unique unless given', () => {
    const a = mustEvent(wfFact('provision'));
    const b = mustEvent(wfFact('provision'));
    expect(a.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.id).not.toBe(b.id);
    expect(toCloudEvent(wfFact('provision'), { ...OPTS, id: 'fixed-1' })!.id).toBe('fixed-1');
  });

  it('fresh ids are UUIDs of version 7: the time in ms first (ordered by it, for the event_id indexes), then random bits', () => {
    const at = Date.UTC(2026, 10, 26, 7, 0, 0, 123);
    const ids = Array.from({ length: 1000 }, (_, i) => eventId(at + (i >> 4)));
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(parseInt(ids[0].slice(0, 8) + ids[0].slice(9, 13), 16)).toBe(at);
    expect(new Set(ids).size).toBe(ids.length);
    // ids of later milliseconds sort after earlier ones
    for (let i = 16; i < ids.length; i += 16) expect(ids[i - 1] < ids[i]).toBe(true);
    expect(mustEvent(wfFact('provision')).id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
  });

  it(
    'fresh ids: every random digit takes every value, the variant digit each of 8, 9, a, b; ' + 'a clock stepped back is written as it is',
    () => {
      const at = Date.UTC(2026, 11, 6, 12, 0, 0, 0);
      // more ids than one fill of random bytes makes, in one millisecond
      const ids = Array.from({ length: 5000 }, () => eventId(at));
      expect(new Set(ids).size).toBe(ids.length);
      const random = [15, 16, 17, 20, 21, 22, ...Array.from({ length: 12 }, (_, i) => 24 + i)];
      for (const p of random) expect(new Set(ids.map((id) => id[p])).size).toBe(16);
      expect([...new Set(ids.map((id) => id[19]))].sort()).toEqual(['8', '9', 'a', 'b']);
      for (const id of ids) expect(id.slice(0, 15)).toBe(ids[0].slice(0, 15));
      // the time part follows the clock wherever it goes
      for (const ms of [at + 1, at - 60_000, at + 2]) expect(parseInt(eventId(ms).slice(0, 8) + eventId(ms).slice(9, 13), 16)).toBe(ms);
    },
  );

  it('unclassified facts give no event; ping always gives one', () => {
    expect(toCloudEvent(wfFact('drift_run', 'succeeded'), OPTS)).toBeNull();
    expect(toCloudEvent(stepFact('drift_run', { target_type: 'install_deploys' }), OPTS)).toBeNull();
    expect(toCloudEvent(wfFact('something_new'), OPTS)).toBeNull();
    expect(toCloudEvent(stepFact('something_new', { target_type: 'install_deploys', name: 'deploy api' }), OPTS)).not.toBeNull();
    expect(toCloudEvent(ping, OPTS)).not.toBeNull();
  });
});

describe('data shapes (CONTRACT 6.2)', () => {
  it('workflow started: workflow object only, no parent/outcome keys', () => {
    const f = wfFact('provision', 'started');
    (f.workflow as WorkflowRef & { extra?: string }).extra = 'not carried';
    const ev = mustEvent(f);
    expect(ev.data).toEqual({
      kind: 'workflow',
      transition: 'started',
      org_id: ORG,
      workflow: { id: 'wf_1', type: 'provision', owner_id: INST, owner_type: 'installs' },
      links: linksFor(f, DASH),
    });
    expect('parent' in ev.data).toBe(false);
    expect('outcome' in ev.data).toBe(false);
    expect('step' in ev.data).toBe(false);
    const nullParent = mustEvent(wfFact('provision', 'started', { workflow: wfRef('provision', { parent: null }) }));
    expect('parent' in nullParent.data).toBe(false);
  });

  it('terminal outcomes: status mirrors transition, duration, error only on failed', () => {
    const ok = mustEvent(wfFact('provision', 'succeeded'));
    expect(ok.data.outcome).toEqual({ status: 'succeeded', duration_ms: 1234 });
    const failed = mustEvent(wfFact('provision', 'failed'));
    expect(failed.data.outcome).toEqual({ status: 'failed', duration_ms: 1234, error: 'boom' });
    const cancelled = mustEvent(wfFact('provision', 'cancelled', { outcome: { status: 'cancelled', duration_ms: 7.6, error: 'ignored' } }));
    expect(cancelled.data.outcome).toEqual({ status: 'cancelled', duration_ms: 8 });
    // robustness: a terminal fact without an outcome still carries a valid one
    const bare = mustEvent({ kind: 'workflow', transition: 'failed', org_id: ORG, time: TIME, workflow: wfRef('provision') });
    expect(bare.data.outcome).toEqual({ status: 'failed', duration_ms: 0, error: 'failed' });
  });

  it('step events: parent, step, action, outcome', () => {
    const parent = { workflow_id: 'wf_parent', step_id: 'st_parent', kind: 'workflow_step' as const };
    const f = stepFact(
      'action_workflow_run',
      { name: 'run backup', idx: 2, target_type: 'install_action_workflow_runs', target_id: 'awr_1' },
      'failed',
      {
        workflow: wfRef('action_workflow_run', { parent }),
        action: { id: 'act_1', name: 'backup' },
      },
    );
    const ev = mustEvent(f);
    expect(ev.data).toEqual({
      kind: 'workflow_step',
      transition: 'failed',
      org_id: ORG,
      workflow: { id: 'wf_1', type: 'action_workflow_run', owner_id: INST, owner_type: 'installs' },
      parent,
      step: {
        id: 'st_1',
        name: 'run backup',
        idx: 2,
        target_type: 'install_action_workflow_runs',
        target_id: 'awr_1',
        component_id: null,
        sandbox_id: null,
        execution_type: 'system',
      },
      action: { id: 'act_1', name: 'backup' },
      outcome: { status: 'failed', duration_ms: 56, error: 'step boom' },
      links: linksFor(f, DASH),
    });
    expect(Object.keys(ev.data)).toEqual(['kind', 'transition', 'org_id', 'workflow', 'parent', 'step', 'action', 'outcome', 'links']);
    expect(ev.interests).toEqual([
      'resource:actions',
      'op:actions.run',
      'event:lifecycle.failed',
      'outcome:completion',
      'outcome:failures',
    ]);
  });

  it('step without a target type: nulls, and component/sandbox denormalized', () => {
    const a = mustEvent(stepFact('sync_secrets', { name: 'sync secrets' }));
    expect(a.data.step).toEqual({
      id: 'st_1',
      name: 'sync secrets',
      idx: 0,
      target_type: null,
      target_id: null,
      component_id: null,
      sandbox_id: null,
      execution_type: 'system',
    });
    const b = mustEvent(
      stepFact(
        'provision',
        { name: 'provision sandbox', target_type: 'install_sandbox_runs', target_id: 'isr_1', sandbox_id: 'sbx_1' },
        'succeeded',
      ),
    );
    expect((b.data.step as Record<string, unknown>).sandbox_id).toBe('sbx_1');
    expect(b.interests).toEqual(['resource:sandboxes', 'op:sandboxes.provision', 'event:lifecycle.succeeded', 'outcome:completion']);
  });

  it('approval request and responses', () => {
    const plan = { install_group: 'canary', installs: [{ install_id: 'inst_1' }] };
    const req = mustEvent(
      approvalFact(
        'app_branch_run',
        'requested',
        { name: 'plan install group: canary' },
        { plan },
        { owner_type: 'app_branches', owner_id: 'br_1' },
      ),
    );
    expect(Object.keys(req.data)).toEqual(['kind', 'transition', 'org_id', 'workflow', 'step', 'approval', 'links']);
    // the request links to the step's card on its workflow's page, where it is approved or rejected (CONTRACT 4.3)
    expect(req.data.approval).toEqual({ status: 'requested', plan, url: `${DASH}/${ORG}/workflows/wf_1#step-st_1` });
    expect(req.data.workflow).toEqual({ id: 'wf_1', type: 'app_branch_run', owner_id: 'br_1', owner_type: 'app_branches' });
    expect(req.data.links).toEqual({ org: `${DASH}/${ORG}`, workflow: `${DASH}/${ORG}/workflows/wf_1` });
    const resp = mustEvent(approvalFact('app_branch_run', 'approved', {}, { note: 'looks right', responded_at: TIME }));
    expect(resp.data.approval).toEqual({ status: 'approved', note: 'looks right', responded_at: TIME });
    expect(resp.interests[2]).toBe('event:approval.response.approved');
  });

  it('approval plan over 64 KiB is left out and plan_truncated is set', () => {
    const big = { blob: 'x'.repeat(MAX_PLAN_BYTES) };
    const ev = mustEvent(approvalFact('app_branch_run', 'requested', {}, { plan: big }));
    expect(ev.data.approval).toEqual({ status: 'requested', plan_truncated: true, url: `${DASH}/${ORG}/workflows/wf_1#step-st_1` });
    // exactly 64 KiB of JSON is kept
    const exact = { b: 'y'.repeat(MAX_PLAN_BYTES - JSON.stringify({ b: '' }).length) };
    expect(Buffer.byteLength(JSON.stringify(exact))).toBe(MAX_PLAN_BYTES);
    expect(
      (mustEvent(approvalFact('app_branch_run', 'requested', {}, { plan: exact })).data.approval as Record<string, unknown>).plan,
    ).toEqual(exact);
    // multi-byte characters count as bytes
    const wide = { b: 'é'.repeat(MAX_PLAN_BYTES / 2) };
    expect(mustEvent(approvalFact('app_branch_run', 'requested', {}, { plan: wide })).data.approval).toMatchObject({
      status: 'requested',
      plan_truncated: true,
    });
  });

  it('drift', () => {
    const f = driftFact({ component_id: 'cmp_1', changes: [{ address: 'aws_s3_bucket.b', action: 'update' }] });
    const ev = mustEvent(f);
    expect(Object.keys(ev.data)).toEqual(['kind', 'transition', 'org_id', 'workflow', 'step', 'install_id', 'drift', 'links']);
    expect(ev.data.install_id).toBe(INST);
    expect(ev.data.drift).toEqual({ component_id: 'cmp_1', changes: [{ address: 'aws_s3_bucket.b', action: 'update' }] });
    expect(ev.data.workflow).toEqual({ id: 'wf_1', type: 'drift_run', owner_id: INST, owner_type: 'installs' });
    expect(ev.data.links).toEqual(
      expect.objectContaining({
        install: `${DASH}/${ORG}/installs/${INST}`,
        component: `${DASH}/${ORG}/installs/${INST}/components/cmp_1`,
      }),
    );
  });

  it('component and install health', () => {
    const c = mustEvent(compHealth('unhealthy'));
    expect(c.data).toEqual({
      kind: 'component_health',
      transition: 'unhealthy',
      org_id: ORG,
      install_id: INST,
      component_id: 'cmp_1',
      health: { verdict: 'degraded', previous: null, reason: 'probe failed' },
      links: linksFor(compHealth(), DASH),
    });
    expect(mustEvent(compHealth('recovered')).data.health).toEqual({ verdict: 'healthy', previous: 'degraded' });
    const i = mustEvent(instHealth('degraded'));
    expect(i.data).toEqual({
      kind: 'install_health',
      transition: 'degraded',
      org_id: ORG,
      install_id: INST,
      health: { verdict: 'unhealthy', previous: 'healthy', component_id: 'cmp_1' },
      links: { org: `${DASH}/${ORG}`, install: `${DASH}/${ORG}/installs/${INST}` },
    });
  });

  it('runners', () => {
    const u = mustEvent(runnerUnhealthy());
    expect(u.data).toEqual({
      kind: 'runner_unhealthy',
      transition: 'unhealthy',
      org_id: ORG,
      runner: RUNNER,
      reason: 'process missing',
      install_id: INST,
      links: { org: `${DASH}/${ORG}`, install: `${DASH}/${ORG}/installs/${INST}` },
    });
    const orgRunner = mustEvent(runnerUnhealthy(null));
    expect('install_id' in orgRunner.data).toBe(false);
    expect(mustEvent(runnerInactive('rotated')).data.reason).toBe('rotated');
    expect('reason' in mustEvent(runnerInactive()).data).toBe(false);
  });

  it('ping', () => {
    const ev = mustEvent(ping);
    expect(ev.data).toEqual({
      kind: 'webhook_ping',
      transition: 'ping',
      org_id: ORG,
      webhook_id: 'wh_1',
      links: { org: `${DASH}/${ORG}` },
    });
    expect(ev.interests).toEqual(['event:webhook.ping']);
  });
});

describe('every produced envelope passes the cloudevents SDK', () => {
  it('across all workflow types, step targets and transitions', () => {
    const types = [
      'provision',
      'deprovision',
      'reprovision',
      'manual_deploy',
      'deploy_components',
      'app_config_update',
      'teardown_component',
      'reprovision_sandbox',
      'deprovision_sandbox',
      'input_update',
      'sync_secrets',
      'action_workflow_run',
      'provision_runner',
      'reprovision_runner',
      'app_branch_run',
      'drift_run',
      'drift_run_reprovision_sandbox',
      'unknown_type',
    ];
    const targets = [
      null,
      'install_sandbox_runs',
      'install_deploys',
      'install_action_workflow_runs',
      'install_stack_versions',
      'runners',
      'other',
    ];
    let n = 0;
    for (const type of types) {
      for (const t of ['started', 'succeeded', 'failed', 'cancelled'] as const) {
        const ev = toCloudEvent(wfFact(type, t), OPTS);
        if (ev) {
          sdkValidate(ev);
          n++;
        }
        for (const target_type of targets) {
          const sev = toCloudEvent(stepFact(type, { target_type, component_id: 'cmp_1', sandbox_id: null }, t), OPTS);
          if (sev) {
            sdkValidate(sev);
            n++;
          }
        }
      }
    }
    expect(n).toBeGreaterThan(400);
  });
});

describe('the SDK check is live', () => {
  it('rejects a bad extension name and a missing required attribute', () => {
    const ev = toCloudEvent(wfFact('provision'), OPTS)!;
    expect(() => sdkValidate({ ...ev, svc_org: 'x' } as unknown as CloudEvent)).toThrow();
    expect(() => sdkValidate({ ...ev, source: '' })).toThrow();
  });
});
