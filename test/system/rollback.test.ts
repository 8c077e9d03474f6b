// Config rollback (spec 1, 4; CONTRACT 4.2, 4.3): rolling a two-group fleet back to an older app
// config through a branch run with approvals, per-install version history and diffs, plan_only
// changing nothing at all, a rejected group, an empty group, and a group whose installs finish at
// different times. A real svc in process with a recording receiver.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../store/db.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { FakeRunner } from '../helpers/fake-runner.ts';
import { get, post, trail, waitStep, waitWf } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';

type Json = any;

// ---------------------------------------------------------------------------------------------
// helpers

/** Every row of every table of the store (sqlite_sequence included), in rowid order. */
/**
 * Every table, row by row; except the delivery status, which delivery outcomes of earlier events
 * keep writing (once a second) whatever the API call under test does.
 */
function dumpStore(db: Db): Record<string, unknown[]> {
  const tables = (
    db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'webhook_delivery_status' ORDER BY name").all() as Array<{
      name: string;
    }>
  ).map((t) => t.name);
  const out: Record<string, unknown[]> = {};
  // a WITHOUT ROWID table (recovery_items) is ordered by its primary key, the first column
  const withoutRowid = (t: string) =>
    /WITHOUT\s+ROWID/i.test((db.prepare('SELECT sql FROM sqlite_master WHERE name = ?').get(t) as { sql: string }).sql);
  for (const t of tables) out[t] = db.prepare(`SELECT * FROM "${t}" ORDER BY ${withoutRowid(t) ? 1 : 'rowid'}`).all();
  return out;
}

const V1 = {
  sandbox: { size: 'small' },
  components: [
    { name: 'api', labels: { tier: 'web' }, values: { image: 'api:1', replicas: 2 } },
    { name: 'worker', labels: { tier: 'bg' }, values: { image: 'worker:1' } },
  ],
  inputs: { region: 'eu' },
};
const V2 = {
  sandbox: { size: 'large' },
  components: [
    { name: 'api', labels: { tier: 'web' }, values: { image: 'api:2', replicas: 2 } },
    { name: 'worker', labels: { tier: 'bg' }, values: { image: 'worker:1' } },
    { name: 'cache', values: { image: 'redis:7' } },
  ],
  inputs: { region: 'eu' },
};

/** The reverse diff, v2 → v1. */
const V2_TO_V1 = {
  changed: true,
  components: {
    added: [],
    removed: [{ name: 'cache' }],
    changed: [{ name: 'api', changes: [{ path: 'values.image', op: 'replace', old: 'api:2', new: 'api:1' }] }],
    unchanged: [{ name: 'worker' }],
  },
  sandbox_changed: true,
  inputs_changed: false,
};

async function appWithTwoConfigs(api: ApiClient) {
  const app = await post(api, '/v1/apps', { name: rid('app') });
  const v1 = await post(api, `/v1/apps/${app.app_id}/configs`, V1);
  const v2 = await post(api, `/v1/apps/${app.app_id}/configs`, V2);
  expect([v1.version, v2.version]).toEqual([1, 2]);
  return { app, v1, v2 };
}

async function provisionedOn(api: ApiClient, appId: string, cfgId: string, labels: Record<string, string>): Promise<Json> {
  const install = await post(api, '/v1/installs', { app_id: appId, name: rid('inst'), labels, app_config_id: cfgId });
  const [prov] = await get(api, `/v1/installs/${install.install_id}/workflows`);
  expect((await waitWf(api, prov.workflow_id)).status).toBe('succeeded');
  return install;
}

// ---------------------------------------------------------------------------------------------

describe('rolling a fleet back through a branch run (local runner)', () => {
  let svc: TestService;
  let rcv: Receiver;
  let org: OrgCreds;
  let api: ApiClient;

  beforeAll(async () => {
    svc = await startService();
    rcv = await startReceiver();
    org = svc.createOrg('rollback');
    api = svc.api(org);
    await post(api, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook('all') });
    await post(api, '/v1/orgs/current/webhooks', {
      webhook_url: rcv.hook('approvals'),
      interests: { resources: { app_branches: { outcome: 'none', approval_requests: true, approval_responses: true } } },
    });
  });
  afterAll(async () => {
    await svc?.stop();
    await rcv?.close();
  });

  it('two groups (by install_ids and by selector), v2 → v1 with skip_builds: reverse-diff plans, approvals, versions, diffs, child ' +
    'workflows', {
    timeout: 60_000,
  }, async () => {
    const { app, v1, v2 } = await appWithTwoConfigs(api);
    const canary = await provisionedOn(api, app.app_id, v2.app_config_id, { ring: 'canary' });
    const eu = await provisionedOn(api, app.app_id, v2.app_config_id, { ring: 'main', region: 'eu' });
    const us = await provisionedOn(api, app.app_id, v2.app_config_id, { ring: 'main', region: 'us' });
    const other = await provisionedOn(api, app.app_id, v2.app_config_id, { ring: 'other' });
    const fleet = [canary, eu, us];

    const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
      name: 'main',
      install_groups: [
        { name: 'canary', install_ids: [canary.install_id] },
        { name: 'main', selector: { match_labels: { ring: 'main' } } },
      ],
    });
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v1.app_config_id,
      skip_builds: true,
    });
    expect(run.run_id).toBeTruthy();
    const W = run.workflow_id;

    // group 1 plan: the reverse diff, in the step and in the approval request event
    const { wf: w1, step: plan1 } = await waitStep(api, W, 'plan install group: canary', 'awaiting_approval');
    expect(w1).toMatchObject({
      type: 'app_branch_run',
      owner_id: branch.app_branch_id,
      owner_type: 'app_branches',
      status: 'started',
      parent: null,
    });
    expect(w1.steps.map((s: Json) => [s.name, s.execution_type, s.status])).toEqual([
      ['build components', 'skipped', 'succeeded'],
      ['plan install group: canary', 'approval', 'awaiting_approval'],
      ['deploy install group: canary', 'system', 'pending'],
      ['plan install group: main', 'approval', 'pending'],
      ['deploy install group: main', 'system', 'pending'],
    ]);
    const expectedPlan1 = {
      install_group: 'canary',
      installs: [
        {
          install_id: canary.install_id,
          install_name: canary.name,
          labels: { ring: 'canary' },
          old_app_config_id: v2.app_config_id,
          new_app_config_id: v1.app_config_id,
          diff: V2_TO_V1,
          // no change window holds it: it starts once approved (CONTRACT 4.3 "Change windows")
          scheduled_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
          blocked_by: [],
          blocked_by_names: [],
        },
      ],
    };
    expect(plan1.plan).toEqual(expectedPlan1);
    expect(plan1.approval).toEqual({ status: 'requested', plan: expectedPlan1 });
    const reqSubject = `${org.org_id}/workflow_step_approval/${W}/${plan1.step_id}/requested`;
    const request = (await waitFor(() => rcv.at('all').find((r) => r.json.subject === reqSubject), 5000, 'the approval request')).json;
    expect(request.type).toBe('com.svc.workflow_step.approval.v1');
    expect(request.data.approval).toEqual({
      status: 'requested',
      plan: expectedPlan1,
      url: `${svc.url}/dashboard/${org.org_id}/workflows/${W}#step-${plan1.step_id}`,
    });
    expect(request.data.step).toMatchObject({ id: plan1.step_id, name: 'plan install group: canary', execution_type: 'approval' });
    expect(request.data.workflow).toMatchObject({ id: W, type: 'app_branch_run', owner_type: 'app_branches' });
    expect(request.interests).toEqual(expect.arrayContaining(['event:approval.request']));
    // nothing applied yet
    for (const i of fleet)
      expect((await get(api, `/v1/installs/${i.install_id}/workflows`)).map((w: Json) => w.type)).toEqual(['provision']);

    const ok1 = await post(api, `/v1/workflows/${W}/steps/${plan1.step_id}/approval`, { response: 'approved', note: 'canary first' }, 200);
    expect(ok1).toMatchObject({ step_id: plan1.step_id, status: 'succeeded' });
    expect(ok1.approval).toMatchObject({ status: 'approved', note: 'canary first', plan: expectedPlan1 });
    expect(typeof ok1.approval.responded_at).toBe('string');

    // group 2 plan: computed when its turn comes (canary already moved, main still on v2)
    const { wf: w2, step: plan2 } = await waitStep(api, W, 'plan install group: main', 'awaiting_approval');
    expect(w2.steps.map((s: Json) => s.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'awaiting_approval', 'pending']);
    const expectedPlan2 = {
      install_group: 'main',
      installs: [eu, us].map((i) => ({
        install_id: i.install_id,
        install_name: i.name,
        labels: i.labels,
        old_app_config_id: v2.app_config_id,
        new_app_config_id: v1.app_config_id,
        diff: V2_TO_V1,
        scheduled_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        blocked_by: [],
        blocked_by_names: [],
      })),
    };
    expect(plan2.plan).toEqual(expectedPlan2);
    const req2 = `${org.org_id}/workflow_step_approval/${W}/${plan2.step_id}/requested`;
    expect(
      (await waitFor(() => rcv.at('all').find((r) => r.json.subject === req2), 5000, 'the second request')).json.data.approval.plan,
    ).toEqual(expectedPlan2);
    expect((await get(api, `/v1/installs/${canary.install_id}`)).app_config_id).toBe(v1.app_config_id);
    for (const i of [eu, us]) expect((await get(api, `/v1/installs/${i.install_id}`)).app_config_id).toBe(v2.app_config_id);

    await post(api, `/v1/workflows/${W}/steps/${plan2.step_id}/approval`, { response: 'approved' }, 200);
    const done = await waitWf(api, W);
    expect(done.status, done.error).toBe('succeeded');
    expect(done.steps.map((s: Json) => s.status)).toEqual(Array(5).fill('succeeded'));
    const deploy1 = done.steps[2];
    const deploy2 = done.steps[4];

    // every install: on v1, history newest first, the child workflow parented to its group's deploy step
    for (const i of fleet) {
      const view = await get(api, `/v1/installs/${i.install_id}`);
      expect(view.app_config_id).toBe(v1.app_config_id);
      expect(view.components.map((c: Json) => c.name)).toEqual(['api', 'worker']);
      const comps = Object.fromEntries(i.components.map((c: Json) => [c.name, c.component_id]));
      expect(view.components.map((c: Json) => c.component_id)).toEqual([comps.api, comps.worker]);

      const wfs = await get(api, `/v1/installs/${i.install_id}/workflows`);
      expect(wfs.map((w: Json) => w.type)).toEqual(['app_config_update', 'provision']);
      const child = await get(api, `/v1/workflows/${wfs[0].workflow_id}`);
      const parentStep = i === canary ? deploy1 : deploy2;
      expect(child).toMatchObject({ type: 'app_config_update', owner_id: i.install_id, owner_type: 'installs', status: 'succeeded' });
      expect(child.parent).toEqual({ workflow_id: W, step_id: parentStep.step_id, kind: 'workflow_step' });
      expect(child.steps.map((s: Json) => [s.name, s.status])).toEqual([
        ['reprovision sandbox', 'succeeded'],
        ['teardown cache', 'succeeded'],
        ['deploy api', 'succeeded'],
      ]);
      expect(child.steps[1].component_id).toBe(comps.cache);
      expect(child.steps[2].component_id).toBe(comps.api);

      const versions = await get(api, `/v1/installs/${i.install_id}/app-config-versions`);
      expect(versions).toHaveLength(2);
      const [newest, first] = versions;
      expect(newest).toMatchObject({
        install_id: i.install_id,
        version: 2,
        app_config_id: v1.app_config_id,
        old_app_config_id: v2.app_config_id,
        workflow_id: child.workflow_id,
        status: 'succeeded',
      });
      expect(newest.app_config).toMatchObject({ app_config_id: v1.app_config_id, version: 1, ...V1 });
      expect(first).toMatchObject({
        version: 1,
        app_config_id: v2.app_config_id,
        old_app_config_id: null,
        workflow_id: wfs[1].workflow_id,
        status: 'succeeded',
      });
      expect(first.app_config).toMatchObject({ app_config_id: v2.app_config_id, version: 2, ...V2 });
      expect(newest.created_at >= first.created_at).toBe(true);

      const diff = await get(api, `/v1/installs/${i.install_id}/app-config-versions/${newest.version_id}/diff`);
      expect(diff).toEqual({
        version_id: newest.version_id,
        from_app_config_id: v2.app_config_id,
        to_app_config_id: v1.app_config_id,
        ...V2_TO_V1,
      });
      const firstDiff = await get(api, `/v1/installs/${i.install_id}/app-config-versions/${first.version_id}/diff`);
      expect(firstDiff).toMatchObject({
        from_app_config_id: null,
        to_app_config_id: v2.app_config_id,
        changed: true,
        sandbox_changed: true,
      });
      expect(firstDiff.components.added.map((c: Json) => c.name)).toEqual(['api', 'cache', 'worker']);
    }
    // an install of the app outside every group is untouched
    expect((await get(api, `/v1/installs/${other.install_id}`)).app_config_id).toBe(v2.app_config_id);
    expect(await get(api, `/v1/installs/${other.install_id}/app-config-versions`)).toHaveLength(1);
    expect((await get(api, `/v1/installs/${other.install_id}/workflows`)).map((w: Json) => w.type)).toEqual(['provision']);

    // the run's events: the skipped build step is silent; each deploy step ends after its children
    const events = await svc.events(org.org_id);
    expect(trail(events, W)).toEqual([
      'workflow::started',
      'workflow_step:plan install group: canary:started',
      'workflow_step_approval:plan install group: canary:requested',
      'workflow_step_approval:plan install group: canary:approved',
      'workflow_step:plan install group: canary:succeeded',
      'workflow_step:deploy install group: canary:started',
      'workflow_step:deploy install group: canary:succeeded',
      'workflow_step:plan install group: main:started',
      'workflow_step_approval:plan install group: main:requested',
      'workflow_step_approval:plan install group: main:approved',
      'workflow_step:plan install group: main:succeeded',
      'workflow_step:deploy install group: main:started',
      'workflow_step:deploy install group: main:succeeded',
      'workflow::succeeded',
    ]);
    const seqOf = (subject: string) => events.findIndex((e) => e.subject === subject);
    for (const [step, members] of [
      [deploy1, [canary]],
      [deploy2, [eu, us]],
    ] as const) {
      const stepDone = seqOf(`${org.org_id}/workflow_step/${W}/${step.step_id}/succeeded`);
      const stepStarted = seqOf(`${org.org_id}/workflow_step/${W}/${step.step_id}/started`);
      for (const i of members) {
        const [child] = await get(api, `/v1/installs/${i.install_id}/workflows`);
        const childEvents = events.filter((e) => e.data.workflow?.id === child.workflow_id);
        expect(childEvents.length).toBe(2 + 3 * 2);
        for (const e of childEvents) expect(e.data.parent).toEqual({ workflow_id: W, step_id: step.step_id, kind: 'workflow_step' });
        expect(seqOf(`${org.org_id}/workflow/${child.workflow_id}/started`)).toBeGreaterThan(stepStarted);
        expect(seqOf(`${org.org_id}/workflow/${child.workflow_id}/succeeded`)).toBeLessThan(stepDone);
      }
    }
    // approval events went to the approvals-only webhook too (both requests, both responses, nothing else)
    await svc.settled(); // every committed event delivered: nothing more arrives
    expect(
      rcv
        .at('approvals')
        .filter((r) => r.json.data.workflow.id === W)
        .map((r) => `${r.json.data.step.name}:${r.json.data.transition}`)
        .sort(),
    ).toEqual([
      'plan install group: canary:approved',
      'plan install group: canary:requested',
      'plan install group: main:approved',
      'plan install group: main:requested',
    ]);
  });

  it('a rejected first group fails that step and the run; the rest ends cancelled without events; nothing is applied', async () => {
    const { app, v1, v2 } = await appWithTwoConfigs(api);
    const a = await provisionedOn(api, app.app_id, v2.app_config_id, { ring: 'a' });
    const b = await provisionedOn(api, app.app_id, v2.app_config_id, { ring: 'b' });
    const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
      name: 'main',
      install_groups: [
        { name: 'first', install_ids: [a.install_id] },
        { name: 'second', selector: { match_labels: { ring: 'b' } } },
      ],
    });
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v1.app_config_id,
      skip_builds: true,
    });
    const { step } = await waitStep(api, run.workflow_id, 'plan install group: first', 'awaiting_approval');
    const rejected = await post(
      api,
      `/v1/workflows/${run.workflow_id}/steps/${step.step_id}/approval`,
      { response: 'rejected', note: 'api:1 is broken' },
      200,
    );
    expect(rejected.status).toBe('failed');
    expect(rejected.approval).toMatchObject({ status: 'rejected', note: 'api:1 is broken' });

    const wf = await waitWf(api, run.workflow_id);
    expect(wf.status).toBe('failed');
    expect(wf.error).toMatch(/reject/);
    expect(wf.steps.map((s: Json) => s.status)).toEqual(['succeeded', 'failed', 'cancelled', 'cancelled', 'cancelled']);
    const events = await svc.events(org.org_id);
    expect(trail(events, run.workflow_id)).toEqual([
      'workflow::started',
      'workflow_step:plan install group: first:started',
      'workflow_step_approval:plan install group: first:requested',
      'workflow_step_approval:plan install group: first:rejected',
      'workflow_step:plan install group: first:failed',
      'workflow::failed',
    ]);
    const response = events.find((e) => e.subject === `${org.org_id}/workflow_step_approval/${run.workflow_id}/${step.step_id}/rejected`);
    expect(response.data.approval).toMatchObject({ status: 'rejected', note: 'api:1 is broken' });
    expect(response.interests).toEqual(expect.arrayContaining(['event:approval.response.rejected']));
    const failed = events.find((e) => e.subject === `${org.org_id}/workflow_step/${run.workflow_id}/${step.step_id}/failed`);
    expect(failed.data.outcome.error).toMatch(/reject/);
    for (const i of [a, b]) {
      expect((await get(api, `/v1/installs/${i.install_id}`)).app_config_id).toBe(v2.app_config_id);
      expect(await get(api, `/v1/installs/${i.install_id}/app-config-versions`)).toHaveLength(1);
      expect((await get(api, `/v1/installs/${i.install_id}/workflows`)).map((w: Json) => w.type)).toEqual(['provision']);
    }
    // answering again is a conflict
    expect((await api.post(`/v1/workflows/${run.workflow_id}/steps/${step.step_id}/approval`, { response: 'approved' })).status).toBe(409);
  });

  it(
    'a group with no installs is skipped silently; the next group is planned and applied; ' + 'without skip_builds the build step runs',
    async () => {
      const { app, v1, v2 } = await appWithTwoConfigs(api);
      const a = await provisionedOn(api, app.app_id, v2.app_config_id, { ring: 'a' });
      const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
        name: 'main',
        install_groups: [
          { name: 'nobody', selector: { match_labels: { ring: 'nowhere' } } },
          { name: 'real', install_ids: [a.install_id] },
          { name: 'nobody either', selector: { match_labels: { ring: '*', team: 'none' } } },
        ],
      });
      const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, { app_config_id: v1.app_config_id });
      const { wf, step } = await waitStep(api, run.workflow_id, 'plan install group: real', 'awaiting_approval');
      expect(wf.steps.map((s: Json) => [s.name, s.execution_type, s.status])).toEqual([
        ['build components', 'system', 'succeeded'],
        ['plan install group: nobody', 'skipped', 'succeeded'],
        ['deploy install group: nobody', 'skipped', 'succeeded'],
        ['plan install group: real', 'approval', 'awaiting_approval'],
        ['deploy install group: real', 'system', 'pending'],
        ['plan install group: nobody either', 'skipped', 'pending'],
        ['deploy install group: nobody either', 'skipped', 'pending'],
      ]);
      expect(step.plan.installs.map((i: Json) => i.install_id)).toEqual([a.install_id]);
      await post(api, `/v1/workflows/${run.workflow_id}/steps/${step.step_id}/approval`, { response: 'approved' }, 200);
      const done = await waitWf(api, run.workflow_id);
      expect(done.status).toBe('succeeded');
      expect(done.steps.map((s: Json) => s.status)).toEqual(Array(7).fill('succeeded'));
      expect(trail(await svc.events(org.org_id), run.workflow_id)).toEqual([
        'workflow::started',
        'workflow_step:build components:started',
        'workflow_step:build components:succeeded',
        'workflow_step:plan install group: real:started',
        'workflow_step_approval:plan install group: real:requested',
        'workflow_step_approval:plan install group: real:approved',
        'workflow_step:plan install group: real:succeeded',
        'workflow_step:deploy install group: real:started',
        'workflow_step:deploy install group: real:succeeded',
        'workflow::succeeded',
      ]);
      expect((await get(api, `/v1/installs/${a.install_id}`)).app_config_id).toBe(v1.app_config_id);
    },
  );

  it('rolling one install back directly: plan_only first, then applied; a config of another app is 400, an unknown one 404', async () => {
    const { app, v1, v2 } = await appWithTwoConfigs(api);
    const i = await provisionedOn(api, app.app_id, v2.app_config_id, {});
    const plan = await post(
      api,
      `/v1/installs/${i.install_id}/app-config-updates`,
      { app_config_id: v1.app_config_id, plan_only: true },
      200,
    );
    expect(plan).toEqual({
      applied: false,
      plan: { from_app_config_id: v2.app_config_id, to_app_config_id: v1.app_config_id, ...V2_TO_V1 },
    });
    const applied = await post(api, `/v1/installs/${i.install_id}/app-config-updates`, { app_config_id: v1.app_config_id });
    expect(applied).toMatchObject({ applied: true, plan: plan.plan });
    const wf = await waitWf(api, applied.workflow_id);
    expect(wf).toMatchObject({ type: 'app_config_update', status: 'succeeded', parent: null });
    const [newest] = await get(api, `/v1/installs/${i.install_id}/app-config-versions`);
    expect(newest).toMatchObject({
      version_id: applied.version_id,
      version: 2,
      app_config_id: v1.app_config_id,
      old_app_config_id: v2.app_config_id,
      status: 'succeeded',
      workflow_id: wf.workflow_id,
    });

    const otherApp = await appWithTwoConfigs(api);
    expect((await api.post(`/v1/installs/${i.install_id}/app-config-updates`, { app_config_id: otherApp.v1.app_config_id })).status).toBe(
      400,
    );
    expect((await api.post(`/v1/installs/${i.install_id}/app-config-updates`, { app_config_id: 'cfg_nope' })).status).toBe(404);
    const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
      name: 'b',
      install_groups: [{ name: 'g', install_ids: [i.install_id] }],
    });
    expect(
      (await api.post(`/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, { app_config_id: otherApp.v1.app_config_id })).status,
    ).toBe(400);
    expect(
      (await api.post(`/v1/apps/${app.app_id}/branches`, { name: 'x', install_groups: [{ name: 'g', install_ids: [i.install_id] }] }))
        .status,
    ).toBe(201);
    expect(
      (
        await api.post(`/v1/apps/${otherApp.app.app_id}/branches`, {
          name: 'x',
          install_groups: [{ name: 'g', install_ids: [i.install_id] }],
        })
      ).status,
    ).toBe(400);
  });
});

// ---------------------------------------------------------------------------------------------

describe('with an external runner (no heartbeats, so the store is still)', () => {
  let svc: TestService;
  let rcv: Receiver;
  let org: OrgCreds;
  let api: ApiClient;
  let runner: FakeRunner;

  beforeAll(async () => {
    svc = await startService({ localRunner: false });
    rcv = await startReceiver();
    org = svc.createOrg('rollback-external');
    api = svc.api(org);
    runner = new FakeRunner(svc.server.bus);
    await post(api, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook('all') });
  });
  afterAll(async () => {
    runner?.stop();
    await svc?.stop();
    await rcv?.close();
  });

  it('plan_only changes nothing at all: every table is the same before and after, and no event is sent', async () => {
    const { app, v1, v2 } = await appWithTwoConfigs(api);
    const i = await provisionedOn(api, app.app_id, v2.app_config_id, { ring: 'a' });
    // quiet: every job answered, every delivery made, nothing in flight
    await runner.idle();
    await svc.settled();
    const delivered = rcv.all.length;
    expect(delivered).toBe((await svc.events(org.org_id)).length);
    const jobs = runner.jobs.length;
    const before = dumpStore(svc.server.ctx.db);
    expect(Object.keys(before)).toEqual(
      expect.arrayContaining(['app_config_versions', 'installs', 'install_components', 'workflows', 'steps', 'jobs', 'outbox', 'runners']),
    );

    const r1 = await post(
      api,
      `/v1/installs/${i.install_id}/app-config-updates`,
      { app_config_id: v1.app_config_id, plan_only: true },
      200,
    );
    expect(r1).toEqual({ applied: false, plan: { from_app_config_id: v2.app_config_id, to_app_config_id: v1.app_config_id, ...V2_TO_V1 } });
    // the same config again: a plan with no change, still nothing applied
    const r2 = await post(
      api,
      `/v1/installs/${i.install_id}/app-config-updates`,
      { app_config_id: v2.app_config_id, plan_only: true },
      200,
    );
    expect(r2.applied).toBe(false);
    expect(r2.plan.changed).toBe(false);
    expect(r2.workflow_id).toBeUndefined();

    // a job or an event would show now: the runner took everything off the bus, every event is delivered
    await runner.idle();
    await svc.settled();
    expect(dumpStore(svc.server.ctx.db)).toEqual(before);
    expect(rcv.all.length).toBe(delivered);
    expect(runner.jobs.length).toBe(jobs);

    // the dump does see a real change (so the comparison above means something)
    const applied = await post(api, `/v1/installs/${i.install_id}/app-config-updates`, { app_config_id: v1.app_config_id });
    expect((await waitWf(api, applied.workflow_id)).status).toBe('succeeded');
    const after = dumpStore(svc.server.ctx.db);
    expect(after.app_config_versions.length).toBe(before.app_config_versions.length + 1);
    expect(after.workflows.length).toBe(before.workflows.length + 1);
    await waitFor(() => rcv.all.length > delivered, 5000, 'deliveries of the applied change');
  });

  it(
    'a group whose installs finish at different times: ' + 'the deploy step and the run end only when every install has applied the config',
    async () => {
      const { app, v1, v2 } = await appWithTwoConfigs(api);
      const same = await provisionedOn(api, app.app_id, v1.app_config_id, { ring: 'g' }); // already on the target: nothing to do
      const slow = await provisionedOn(api, app.app_id, v2.app_config_id, { ring: 'g' });
      const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
        name: 'main',
        install_groups: [{ name: 'g', selector: { match_labels: { ring: 'g' } } }],
      });
      runner.holdWhen((job) => job.install_id === slow.install_id && job.app_config_id === v1.app_config_id);
      const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
        app_config_id: v1.app_config_id,
        skip_builds: true,
      });
      const { step } = await waitStep(api, run.workflow_id, 'plan install group: g', 'awaiting_approval');
      expect(step.plan.installs.map((x: Json) => [x.install_id, x.diff.changed])).toEqual([
        [same.install_id, false],
        [slow.install_id, true],
      ]);
      await post(api, `/v1/workflows/${run.workflow_id}/steps/${step.step_id}/approval`, { response: 'approved' }, 200);
      const held = await waitFor(() => runner.held.find((j) => j.install_id === slow.install_id), 5000, "the slow install's job");

      // one child finished at once (no steps), the other is held: the run must wait for it
      const [sameChild] = await get(api, `/v1/installs/${same.install_id}/workflows`);
      expect(sameChild).toMatchObject({ type: 'app_config_update', status: 'succeeded' });
      await runner.idle(); // everything but the held job is done: the run waits for it
      const mid = await get(api, `/v1/workflows/${run.workflow_id}`);
      expect(mid.status).toBe('started');
      expect(mid.steps.map((s: Json) => s.status)).toEqual(['succeeded', 'succeeded', 'started']);
      const [slowChild] = await get(api, `/v1/installs/${slow.install_id}/workflows`);
      expect(slowChild).toMatchObject({ type: 'app_config_update', status: 'started' });
      expect(slowChild.parent).toEqual({ workflow_id: run.workflow_id, step_id: mid.steps[2].step_id, kind: 'workflow_step' });

      runner.holdWhen(() => false);
      await runner.finish(held);
      const done = await waitWf(api, run.workflow_id);
      expect(done.status).toBe('succeeded');
      expect((await get(api, `/v1/workflows/${slowChild.workflow_id}`)).status).toBe('succeeded');
      const events = await svc.events(org.org_id);
      const deployDone = events.findIndex(
        (e) => e.subject === `${org.org_id}/workflow_step/${run.workflow_id}/${mid.steps[2].step_id}/succeeded`,
      );
      const slowDone = events.findIndex((e) => e.subject === `${org.org_id}/workflow/${slowChild.workflow_id}/succeeded`);
      expect(slowDone).toBeGreaterThan(-1);
      expect(deployDone).toBeGreaterThan(slowDone);
      expect(trail(events, run.workflow_id).filter((t) => t.startsWith('workflow_step:deploy'))).toEqual([
        'workflow_step:deploy install group: g:started',
        'workflow_step:deploy install group: g:succeeded',
      ]);
      for (const x of [same, slow]) {
        const [v] = await get(api, `/v1/installs/${x.install_id}/app-config-versions`);
        expect(v).toMatchObject({ version: 2, app_config_id: v1.app_config_id, status: 'succeeded' });
      }
    },
  );

  it("a failing install fails its group's deploy step and the run; later groups are cancelled", async () => {
    const { app, v1, v2 } = await appWithTwoConfigs(api);
    const bad = await provisionedOn(api, app.app_id, v2.app_config_id, { ring: 'g' });
    const good = await provisionedOn(api, app.app_id, v2.app_config_id, { ring: 'g' });
    const later = await provisionedOn(api, app.app_id, v2.app_config_id, { ring: 'later' });
    const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
      name: 'main',
      install_groups: [
        { name: 'g', selector: { match_labels: { ring: 'g' } } },
        { name: 'later', install_ids: [later.install_id] },
      ],
    });
    runner.holdWhen((job) => job.install_id === bad.install_id && job.app_config_id === v1.app_config_id);
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v1.app_config_id,
      skip_builds: true,
    });
    const { step } = await waitStep(api, run.workflow_id, 'plan install group: g', 'awaiting_approval');
    await post(api, `/v1/workflows/${run.workflow_id}/steps/${step.step_id}/approval`, { response: 'approved' }, 200);
    const held = await waitFor(() => runner.held.find((j) => j.install_id === bad.install_id), 5000, "the bad install's job");
    runner.holdWhen(() => false);
    await runner.idle(); // the good install has applied the config
    expect((await get(api, `/v1/installs/${good.install_id}/app-config-versions`))[0]).toMatchObject({
      app_config_id: v1.app_config_id,
      status: 'succeeded',
    });
    await runner.send(held, [{ status: 'started' }, { status: 'failed', error: 'sandbox quota exceeded' }]);
    const wf = await waitWf(api, run.workflow_id);
    expect(wf.status).toBe('failed');
    expect(wf.steps.map((s: Json) => s.status)).toEqual(['succeeded', 'succeeded', 'failed', 'cancelled', 'cancelled']);
    expect(wf.steps[2].error).toMatch(/1 of 2/);
    const [badVersion] = await get(api, `/v1/installs/${bad.install_id}/app-config-versions`);
    expect(badVersion).toMatchObject({ app_config_id: v1.app_config_id, status: 'failed' });
    const [goodVersion] = await get(api, `/v1/installs/${good.install_id}/app-config-versions`);
    expect(goodVersion).toMatchObject({ app_config_id: v1.app_config_id, status: 'succeeded' });
    expect(await get(api, `/v1/installs/${later.install_id}/app-config-versions`)).toHaveLength(1);
    expect(trail(await svc.events(org.org_id), run.workflow_id).slice(-3)).toEqual([
      'workflow_step:deploy install group: g:started',
      'workflow_step:deploy install group: g:failed',
      'workflow::failed',
    ]);
  });
});
