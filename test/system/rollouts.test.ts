// Health-gated rollouts, fleet rollbacks, vetoed configs and approval links (CONTRACT 4.3, issue 19),
// driven as a user drives them: a real svc in process (local runner, real SQLite file, real HTTP),
// the engine on a ManualClock that the test advances through each bake, a fake health producer
// publishing verdicts on the ingest subject (CONTRACT 5.2), and a recording receiver.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { dashboardSession } from '../helpers/dashboard.ts';
import {
  appWithThreeConfigs,
  get,
  getWf,
  installWith as installWithHistory,
  post,
  trail,
  waitStep,
  waitWf,
  healthVerdict,
} from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';

type Json = any;

const cfg = (image: string) => ({
  sandbox: { size: 'small' },
  components: [
    { name: 'api', labels: { tier: 'web' }, values: { image } },
    { name: 'worker', values: { image: 'worker:1' } },
  ],
});
const MIN = 60_000;

let svc: TestService;
let rcv: Receiver;
let org: OrgCreds;
let api: ApiClient;
const clock = new ManualClock(Date.parse('2026-03-01T00:00:00.000Z'));

beforeAll(async () => {
  svc = await startService({}, { clock });
  rcv = await startReceiver();
  org = svc.createOrg('rollouts');
  api = svc.api(org);
  await post(api, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook('all') });
}, 30_000);
afterAll(async () => {
  await svc?.stop();
  await rcv?.close();
});

const app3 = () => appWithThreeConfigs(api, rid('shop'), cfg);

const installWith = (appId: string, cfgId: string, labels: Record<string, string> = {}, then: string[] = []): Promise<Json> =>
  installWithHistory(api, rid('inst'), appId, cfgId, labels, then);

const componentOf = (install: Json, name: string): string => install.components.find((c: Json) => c.name === name).component_id;

/** A health checker's verdict on one component (CONTRACT 5.2), answered once committed. */
const verdict = (install: Json, component: string, v: string, reason?: string) =>
  healthVerdict(svc, org.org_id, install, component, v, reason);

async function approve(W: string, group: string): Promise<Json> {
  const { step } = await waitStep(api, W, `plan install group: ${group}`, 'awaiting_approval');
  await post(api, `/v1/workflows/${W}/steps/${step.step_id}/approval`, { response: 'approved' }, 200);
  return step;
}

/** A branch over three single-install groups g1, g2, g3, every install on v1. */
async function threeGroups(extra: { unhealthyFirst?: boolean } = {}) {
  const { app, v1, v2 } = await app3();
  const installs = [];
  for (let i = 0; i < 3; i++) installs.push(await installWith(app.app_id, v1.app_config_id, { ring: `g${i + 1}` }));
  if (extra.unhealthyFirst) await verdict(installs[0], 'worker', 'unhealthy', 'oom killed');
  const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
    name: 'main',
    install_groups: installs.map((i, n) => ({ name: `g${n + 1}`, install_ids: [i.install_id] })),
  });
  return { app, v1, v2, installs, branch };
}

const stepsOf = (wf: Json) => wf.steps.map((s: Json) => [s.name, s.status]);
const eventsOf = async (W: string) => {
  await svc.settled();
  return (await svc.events(org.org_id)).filter((e) => e.data?.workflow?.id === W);
};

// ---------------------------------------------------------------------------------------------

describe('vetoed configs (CONTRACT 4.3)', () => {
  it('a vetoed config is 409 vetoed on every path that would apply it (update, branch run, fleet rollback, new install, a run ' +
    'already waiting); plans still answer; unveto restores', {
    timeout: 60_000,
  }, async () => {
    const { app, v1, v2 } = await app3();
    const inst = await installWith(app.app_id, v1.app_config_id, { ring: 'a' });
    const A = `/v1/apps/${app.app_id}`;
    const branch = await post(api, `${A}/branches`, { name: 'main', install_groups: [{ name: 'all', install_ids: [inst.install_id] }] });
    // a run started before the veto, waiting at its plan
    const early = await post(api, `${A}/branches/${branch.app_branch_id}/runs`, { app_config_id: v2.app_config_id, skip_builds: true });
    await waitStep(api, early.workflow_id, 'plan install group: all', 'awaiting_approval');

    const vetoed = await post(api, `${A}/configs/${v2.app_config_id}/veto`, { reason: 'api:2 leaks memory' }, 200);
    expect(vetoed).toMatchObject({
      app_config_id: v2.app_config_id,
      version: 2,
      vetoed: { reason: 'api:2 leaks memory', at: new Date(clock.now()).toISOString() },
    });
    const listed = await get(api, `${A}/configs`);
    expect(listed.map((c: Json) => [c.version, c.vetoed?.reason ?? null])).toEqual([
      [3, null],
      [2, 'api:2 leaks memory'],
      [1, null],
    ]);

    const refused = async (p: string, body: unknown) => {
      const r = await api.post(p, body);
      expect(r.status, `${p}: ${r.text}`).toBe(409);
      expect(r.body.error).toBe('vetoed');
      expect(r.body.message).toContain('api:2 leaks memory');
    };
    await refused(`/v1/installs/${inst.install_id}/app-config-updates`, { app_config_id: v2.app_config_id });
    await refused(`${A}/branches/${branch.app_branch_id}/runs`, { app_config_id: v2.app_config_id });
    await refused(`${A}/rollbacks`, { to: v2.app_config_id });
    await refused('/v1/installs', { app_id: app.app_id, name: rid('inst'), app_config_id: v2.app_config_id });
    // nothing was applied or started
    expect((await get(api, `/v1/installs/${inst.install_id}/app-config-versions`)).map((v: Json) => v.app_config_id)).toEqual([
      v1.app_config_id,
    ]);
    expect((await get(api, '/v1/installs')).filter((i: Json) => i.app_id === app.app_id)).toHaveLength(1);

    // plans still answer, and show the veto
    const plan = await post(
      api,
      `/v1/installs/${inst.install_id}/app-config-updates`,
      { app_config_id: v2.app_config_id, plan_only: true },
      200,
    );
    expect(plan).toMatchObject({
      applied: false,
      plan: { to_app_config_id: v2.app_config_id, changed: true, vetoed: { reason: 'api:2 leaks memory' } },
    });
    const fleetPlan = await post(api, `${A}/rollbacks`, { to: v2.app_config_id, plan_only: true }, 200);
    expect(fleetPlan.plan.installs).toEqual([
      expect.objectContaining({
        install_id: inst.install_id,
        new_app_config_id: v2.app_config_id,
        vetoed: expect.objectContaining({ reason: 'api:2 leaks memory' }),
      }),
    ]);

    // the run that was waiting: approving its plan fails the deploy, which applies nothing
    await approve(early.workflow_id, 'all');
    const failed = await waitWf(api, early.workflow_id);
    expect(failed.status).toBe('failed');
    expect(failed.steps.find((s: Json) => s.name === 'deploy install group: all').error).toContain('is vetoed: api:2 leaks memory');
    expect((await get(api, `/v1/installs/${inst.install_id}`)).app_config_id).toBe(v1.app_config_id);

    // bad input changes nothing; another app's config or an unknown one is 404
    expect((await api.post(`${A}/configs/${v1.app_config_id}/veto`, { reason: '' })).status).toBe(400);
    expect((await api.post(`${A}/configs/${v1.app_config_id}/veto`, {})).status).toBe(400);
    expect((await api.post(`${A}/configs/cfg_nope/veto`, { reason: 'x' })).status).toBe(404);
    const other = await app3();
    expect((await api.post(`${A}/configs/${other.v1.app_config_id}/veto`, { reason: 'x' })).status).toBe(404);
    expect((await get(api, `${A}/configs`)).find((c: Json) => c.version === 1).vetoed).toBeNull();

    // unveto: applying it works again
    const lifted = await api.del(`${A}/configs/${v2.app_config_id}/veto`);
    expect(lifted.status).toBe(200);
    expect(lifted.body).toMatchObject({ app_config_id: v2.app_config_id, vetoed: null });
    const applied = await post(api, `/v1/installs/${inst.install_id}/app-config-updates`, { app_config_id: v2.app_config_id });
    expect(applied.plan.vetoed).toBeUndefined();
    expect((await waitWf(api, applied.workflow_id)).status).toBe('succeeded');
  });
});

describe('approval links (CONTRACT 4.3)', () => {
  it("every approval request carries data.approval.url: the dashboard page with that step's approve and reject form", {
    timeout: 60_000,
  }, async () => {
    const { app, v2, installs, branch } = await threeGroups();
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v2.app_config_id,
      skip_builds: true,
    });
    const { step } = await waitStep(api, run.workflow_id, 'plan install group: g1', 'awaiting_approval');
    const subject = `${org.org_id}/workflow_step_approval/${run.workflow_id}/${step.step_id}/requested`;
    const request = (await waitFor(() => rcv.at('all').find((r) => r.json.subject === subject), 5000, 'the approval request')).json;
    const dash = `${svc.url}/dashboard`;
    expect(request.data.approval.url).toBe(`${dash}/${org.org_id}/workflows/${run.workflow_id}#step-${step.step_id}`);

    // signed in, the URL opens the page with that step's card and its approve / reject form
    const session = await dashboardSession(dash, org);
    const page = await session.get(new URL(request.data.approval.url).pathname.slice('/dashboard'.length));
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain(`id="step-${step.step_id}"`);
    expect(html).toContain(`action="/dashboard/${org.org_id}/workflows/${run.workflow_id}/steps/${step.step_id}/approval"`);
    expect(html).toMatch(/name="response" value="approved"/);
    // and answering there approves it
    const res = await session.submit(
      new URL(request.data.approval.url).pathname.slice('/dashboard'.length),
      `/${org.org_id}/workflows/${run.workflow_id}/steps/${step.step_id}/approval`,
      { response: 'approved' },
    );
    expect(res.status).toBe(303);
    expect((await getWf(api, run.workflow_id)).steps.find((s: Json) => s.step_id === step.step_id).approval.status).toBe('approved');
    // (a fleet rollback's requests: see below.) Nothing to roll back is a conflict that starts nothing
    const none = await post(api, `/v1/apps/${app.app_id}/rollbacks`, { to: 'previous', install_ids: [installs[2].install_id] }, 409);
    expect(none).toMatchObject({ error: 'conflict', message: expect.stringContaining('no earlier version') });
    expect((await get(api, `/v1/installs/${installs[2].install_id}/workflows`)).map((w: Json) => w.type)).toEqual(['provision']);
    await api.post(`/v1/workflows/${run.workflow_id}/cancel`);
  });
});

describe('fleet rollback (CONTRACT 4.3)', () => {
  it('to previous over mixed histories: grouped as the branches group them (then `other`), skips listed, plan_only changes ' +
    'nothing, approvals per group, versions recorded', {
    timeout: 90_000,
  }, async () => {
    const { app, v1, v2, v3 } = await app3();
    const a = await installWith(app.app_id, v1.app_config_id, { ring: 'main' }, [v2.app_config_id]); // v1 → v2: back to v1
    const b = await installWith(app.app_id, v2.app_config_id, { ring: 'main' }); // v2 only: skipped
    const c = await installWith(app.app_id, v1.app_config_id, { ring: 'none' }, [v3.app_config_id]); // v1 → v3, in no group: `other`
    // v1 → v3 → v2: back to v3
    const d = await installWith(app.app_id, v1.app_config_id, { ring: 'canary' }, [v3.app_config_id, v2.app_config_id]);
    await post(api, `/v1/apps/${app.app_id}/branches`, {
      name: 'main',
      install_groups: [
        { name: 'canary', selector: { match_labels: { ring: 'canary' } } },
        { name: 'main', selector: { match_labels: { ring: 'main' } } },
      ],
    });
    const before = async () => Promise.all([a, b, c, d].map((i) => get(api, `/v1/installs/${i.install_id}/app-config-versions`)));
    const history = await before();

    const planned = await post(api, `/v1/apps/${app.app_id}/rollbacks`, { to: 'previous', plan_only: true }, 200);
    expect(planned.applied).toBe(false);
    expect(planned.plan.installs.map((i: Json) => [i.install_id, i.install_group, i.old_app_config_id, i.new_app_config_id])).toEqual([
      [d.install_id, 'canary', v2.app_config_id, v3.app_config_id],
      [a.install_id, 'main', v2.app_config_id, v1.app_config_id],
      [c.install_id, 'other', v3.app_config_id, v1.app_config_id],
    ]);
    expect(planned.plan.installs[1]).toMatchObject({ install_name: a.name, labels: { ring: 'main' } });
    expect(planned.plan.installs[1].diff.components.changed).toEqual([
      { name: 'api', changes: [{ path: 'values.image', op: 'replace', old: 'api:2', new: 'api:1' }] },
    ]);
    expect(planned.plan.skipped).toEqual([{ install_id: b.install_id, reason: 'no earlier version' }]);
    // biome-ignore lint/suspicious/noDuplicateTestHooks: `before` is this test's own helper, not a hook
    expect(await before()).toEqual(history);
    expect((await get(api, `/v1/installs/${a.install_id}/workflows`)).map((w: Json) => w.type)).toEqual(['app_config_update', 'provision']);

    // a selector or an install list narrows it; an install of another app is 400
    const narrowed = await post(
      api,
      `/v1/apps/${app.app_id}/rollbacks`,
      { to: 'previous', plan_only: true, selector: { match_labels: { ring: 'canary' } } },
      200,
    );
    expect(narrowed.plan.installs.map((i: Json) => i.install_id)).toEqual([d.install_id]);
    const bad = await api.post(`/v1/apps/${app.app_id}/rollbacks`, { to: 'previous', install_ids: ['inst_nope'] });
    expect(bad.status).toBe(400);
    expect(bad.body.details[0].path).toBe('install_ids.0');
    expect((await api.post(`/v1/apps/${app.app_id}/rollbacks`, { to: 'previous', bogus: 1 })).status).toBe(400);
    expect((await api.post(`/v1/apps/${app.app_id}/rollbacks`, { to: 'previous', health_gate: { bake: '25h' } })).status).toBe(400);
    expect((await api.post(`/v1/apps/app_nope/rollbacks`, { to: 'previous' })).status).toBe(404);

    const run = await post(api, `/v1/apps/${app.app_id}/rollbacks`, { to: 'previous' });
    expect(run).toMatchObject({ run_id: run.workflow_id, plan: { skipped: [{ install_id: b.install_id }] } });
    const W = run.workflow_id;
    const wf = await getWf(api, W);
    expect(wf).toMatchObject({ type: 'app_rollback', owner_id: app.app_id, owner_type: 'apps' });
    expect(wf.steps.map((s: Json) => s.name)).toEqual([
      'plan install group: canary',
      'deploy install group: canary',
      'plan install group: main',
      'deploy install group: main',
      'plan install group: other',
      'deploy install group: other',
    ]);
    const p1 = await approve(W, 'canary');
    expect(p1.plan).toEqual({
      install_group: 'canary',
      installs: [expect.objectContaining({ install_id: d.install_id, new_app_config_id: v3.app_config_id })],
    });
    await approve(W, 'main');
    await approve(W, 'other');
    const done = await waitWf(api, W);
    expect(done.status, done.error).toBe('succeeded');

    for (const [i, from, to] of [
      [d, v2, v3],
      [a, v2, v1],
      [c, v3, v1],
    ] as const) {
      expect((await get(api, `/v1/installs/${i.install_id}`)).app_config_id).toBe(to.app_config_id);
      const [newest] = await get(api, `/v1/installs/${i.install_id}/app-config-versions`);
      expect(newest).toMatchObject({ app_config_id: to.app_config_id, old_app_config_id: from.app_config_id, status: 'succeeded' });
      expect((await getWf(api, newest.workflow_id)).parent.workflow_id).toBe(W);
    }
    expect(await get(api, `/v1/installs/${b.install_id}/app-config-versions`)).toEqual(history[1]);
    // the receiver saw the rollback run (a rollout like a branch run: app_branches/run) and its approval requests with links
    await svc.settled();
    const seen = rcv.at('all').filter((r) => r.json.data?.workflow?.id === W);
    expect(seen.some((r) => r.json.subject === `${org.org_id}/workflow/${W}/succeeded`)).toBe(true);
    const requests = seen.filter((r) => r.json.type === 'com.svc.workflow_step.approval.v1' && r.json.data.transition === 'requested');
    expect(requests).toHaveLength(3);
    for (const r of requests)
      expect(r.json.data.approval.url).toBe(`${svc.url}/dashboard/${org.org_id}/workflows/${W}#step-${r.json.data.step.id}`);
    // the rollback run's page (owned by the app) opens, with each group's step card
    const session = await dashboardSession(`${svc.url}/dashboard`, org);
    const page = await session.get(new URL(requests[0].json.data.approval.url).pathname.slice('/dashboard'.length));
    expect(page.status).toBe(200);
    const html = await page.text();
    for (const r of requests) expect(html).toContain(`id="step-${r.json.data.step.id}"`);
  });
});

describe('health-gated runs (CONTRACT 4.3)', () => {
  it('a gate that passes: each group bakes for the whole bake on the engine clock, then the next group goes', {
    timeout: 90_000,
  }, async () => {
    const { app, v2, installs, branch } = await threeGroups();
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v2.app_config_id,
      skip_builds: true,
      health_gate: { bake: '10m' },
    });
    const W = run.workflow_id;
    expect((await getWf(api, W)).steps.map((s: Json) => s.name)).toEqual([
      'build components',
      ...['g1', 'g2', 'g3'].flatMap((g) => [`plan install group: ${g}`, `deploy install group: ${g}`, `bake install group: ${g}`]),
    ]);
    for (const [n, g] of ['g1', 'g2', 'g3'].entries()) {
      await approve(W, g);
      const { step } = await waitStep(api, W, `bake install group: ${g}`, 'started');
      expect(step).toMatchObject({ execution_type: 'system', target_type: null });
      // a healthy verdict during the bake does not end it; time does
      await verdict(installs[n], 'api', 'healthy');
      clock.advance(10 * MIN - 1000);
      expect((await getWf(api, W)).steps.find((s: Json) => s.name === `bake install group: ${g}`).status).toBe('started');
      clock.advance(1000);
      const baked = (await getWf(api, W)).steps.find((s: Json) => s.name === `bake install group: ${g}`);
      expect(baked.status).toBe('succeeded');
      expect(Date.parse(baked.finished_at) - Date.parse(baked.started_at)).toBe(10 * MIN);
    }
    const done = await waitWf(api, W);
    expect(done.status, done.error).toBe('succeeded');
    for (const i of installs) expect((await get(api, `/v1/installs/${i.install_id}`)).app_config_id).toBe(v2.app_config_id);
    expect((await eventsOf(W)).some((e) => e.data.rollout)).toBe(false);
  });

  it('trips on the second group with halt: the bake fails naming install, component, verdict and reason; the run fails; the third ' +
    'group never starts; events carry the cause', {
    timeout: 90_000,
  }, async () => {
    const { app, v1, v2, installs, branch } = await threeGroups();
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v2.app_config_id,
      skip_builds: true,
      health_gate: { bake: '15m', on: ['degraded', 'unhealthy'], action: 'halt' },
    });
    const W = run.workflow_id;
    await approve(W, 'g1');
    await waitStep(api, W, 'bake install group: g1', 'started');
    clock.advance(15 * MIN);
    await approve(W, 'g2');
    await waitStep(api, W, 'bake install group: g2', 'started');
    clock.advance(5 * MIN);
    // g1's install (already baked) turning bad is not this bake's business
    await verdict(installs[0], 'worker', 'degraded', 'queue backlog');
    expect((await getWf(api, W)).status).toBe('started');
    await verdict(installs[1], 'api', 'degraded', 'p99 latency 2s');
    const done = await waitWf(api, W);
    const api2 = componentOf(installs[1], 'api');
    expect(done.status).toBe('failed');
    const bake = done.steps.find((s: Json) => s.name === 'bake install group: g2');
    expect(bake.status).toBe('failed');
    for (const part of [installs[1].install_id, installs[1].name, api2, 'degraded', 'p99 latency 2s']) expect(bake.error).toContain(part);
    expect(done.error).toBe(bake.error);
    expect(stepsOf(done).slice(-3)).toEqual([
      ['plan install group: g3', 'cancelled'],
      ['deploy install group: g3', 'cancelled'],
      ['bake install group: g3', 'cancelled'],
    ]);
    expect(done.steps.some((s: Json) => s.name.startsWith('rollback'))).toBe(false);
    // halt: what was deployed stays; the third group never started
    expect((await get(api, `/v1/installs/${installs[1].install_id}`)).app_config_id).toBe(v2.app_config_id);
    expect((await get(api, `/v1/installs/${installs[2].install_id}`)).app_config_id).toBe(v1.app_config_id);
    expect((await get(api, `/v1/installs/${installs[2].install_id}/workflows`)).map((w: Json) => w.type)).toEqual(['provision']);

    // the events: none carries the cause before the trip; the bake's failure and the run's do
    const events = await eventsOf(W);
    const rollout = {
      run_id: W,
      trigger: 'health_gate',
      install_id: installs[1].install_id,
      component_id: api2,
      verdict: 'degraded',
      reason: 'p99 latency 2s',
    };
    const failedBake = events.find((e) => e.data.step?.name === 'bake install group: g2' && e.data.transition === 'failed');
    expect(failedBake.data.rollout).toEqual(rollout);
    expect(failedBake.data.outcome.error).toBe(bake.error);
    const runFailed = events.find((e) => e.data.kind === 'workflow' && e.data.transition === 'failed');
    expect(runFailed.data.rollout).toEqual(rollout);
    expect(runFailed.data.outcome.error).toContain('p99 latency 2s');
    expect(events.slice(0, events.indexOf(failedBake)).some((e) => e.data.rollout)).toBe(false);
    expect(trail(events, W).filter((t) => t.includes('g3'))).toEqual([]);
    // the receiver got the same
    await svc.settled();
    expect(rcv.at('all').find((r) => r.json.id === runFailed.id)?.json.data.rollout).toEqual(rollout);
  });

  it('trips on the second group with rollback: rollback steps newest group first return both groups to their configs before the ' +
    'run, versions recorded', {
    timeout: 90_000,
  }, async () => {
    const { app, v1, v2, installs, branch } = await threeGroups();
    // g2's install was on v3 before the run (it goes back to v3, not v1)
    const { v3 } = { v3: (await get(api, `/v1/apps/${app.app_id}/configs`))[0] };
    const moved = await post(api, `/v1/installs/${installs[1].install_id}/app-config-updates`, { app_config_id: v3.app_config_id });
    await waitWf(api, moved.workflow_id);
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v2.app_config_id,
      skip_builds: true,
      health_gate: { bake: '10m', on: ['unhealthy'], action: 'rollback' },
    });
    const W = run.workflow_id;
    await approve(W, 'g1');
    await waitStep(api, W, 'bake install group: g1', 'started');
    clock.advance(10 * MIN);
    await approve(W, 'g2');
    await waitStep(api, W, 'bake install group: g2', 'started');
    // degraded is not in `on`; unhealthy is
    await verdict(installs[1], 'worker', 'degraded', 'slow');
    expect((await getWf(api, W)).status).toBe('started');
    await verdict(installs[1], 'worker', 'unhealthy', 'crash loop');
    const done = await waitWf(api, W);
    expect(done.status).toBe('failed');
    expect(stepsOf(done).slice(4)).toEqual([
      ['plan install group: g2', 'succeeded'],
      ['deploy install group: g2', 'succeeded'],
      ['bake install group: g2', 'failed'],
      ['plan install group: g3', 'cancelled'],
      ['deploy install group: g3', 'cancelled'],
      ['bake install group: g3', 'cancelled'],
      ['rollback install group: g2', 'succeeded'],
      ['rollback install group: g1', 'succeeded'],
    ]);
    expect(done.error).toContain('crash loop');
    const [rb2, rb1] = done.steps.slice(-2);
    // both groups back where they were, each through a child app_config_update of its rollback step, with versions
    for (const [i, was, step] of [
      [installs[0], v1, rb1],
      [installs[1], v3, rb2],
    ] as const) {
      expect((await get(api, `/v1/installs/${i.install_id}`)).app_config_id).toBe(was.app_config_id);
      const versions = await get(api, `/v1/installs/${i.install_id}/app-config-versions`);
      expect(versions[0]).toMatchObject({ app_config_id: was.app_config_id, old_app_config_id: v2.app_config_id, status: 'succeeded' });
      expect(versions[1]).toMatchObject({ app_config_id: v2.app_config_id, old_app_config_id: was.app_config_id, status: 'succeeded' });
      expect((await getWf(api, versions[0].workflow_id)).parent).toEqual({ workflow_id: W, step_id: step.step_id, kind: 'workflow_step' });
    }
    expect((await get(api, `/v1/installs/${installs[2].install_id}/workflows`)).map((w: Json) => w.type)).toEqual(['provision']);
    // the rollback steps' events and the run's end carry the cause
    const events = await eventsOf(W);
    const rollout = {
      run_id: W,
      trigger: 'health_gate',
      install_id: installs[1].install_id,
      component_id: componentOf(installs[1], 'worker'),
      verdict: 'unhealthy',
      reason: 'crash loop',
    };
    const rbEvents = events.filter((e) => e.data.step?.name?.startsWith('rollback install group'));
    expect(rbEvents.map((e) => `${e.data.step.name}:${e.data.transition}`)).toEqual([
      'rollback install group: g2:started',
      'rollback install group: g2:succeeded',
      'rollback install group: g1:started',
      'rollback install group: g1:succeeded',
    ]);
    for (const e of rbEvents) expect(e.data.rollout).toEqual(rollout);
    expect(events.at(-1).data).toMatchObject({ kind: 'workflow', transition: 'failed', rollout });
  });

  it('a verdict already bad when the bake starts trips it at once; a fleet rollback without approvals is gated the same way', {
    timeout: 90_000,
  }, async () => {
    const { app, v2, installs, branch } = await threeGroups({ unhealthyFirst: true });
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v2.app_config_id,
      skip_builds: true,
      health_gate: { bake: '1h' },
    });
    const W = run.workflow_id;
    await approve(W, 'g1');
    const done = await waitWf(api, W); // no clock advance: the bake never waits
    expect(done.status).toBe('failed');
    const bake = done.steps.find((s: Json) => s.name === 'bake install group: g1');
    expect(bake.status).toBe('failed');
    for (const part of [installs[0].install_id, componentOf(installs[0], 'worker'), 'unhealthy', 'oom killed'])
      expect(bake.error).toContain(part);
    expect(
      stepsOf(done)
        .filter(([n]: string[]) => n.includes('g2') || n.includes('g3'))
        .every(([, s]: string[]) => s === 'cancelled'),
    ).toBe(true);

    // the fleet (g1 now on v2, from v1): back to previous, no approvals, gated; g1's install is still unhealthy
    const fleet = await post(api, `/v1/apps/${app.app_id}/rollbacks`, {
      to: 'previous',
      approval: 'none',
      health_gate: { bake: '5m', action: 'halt' },
    });
    expect(fleet.plan.installs.map((i: Json) => i.install_id)).toEqual([installs[0].install_id]);
    expect(fleet.plan.skipped.map((s: Json) => s.install_id).sort()).toEqual([installs[1].install_id, installs[2].install_id].sort());
    const rolled = await waitWf(api, fleet.workflow_id);
    expect(stepsOf(rolled)).toEqual([
      ['deploy install group: g1', 'succeeded'],
      ['bake install group: g1', 'failed'],
    ]);
    expect(rolled.error).toContain('oom killed');
    // once healthy, a gated rollback bakes through (back to v2, the version before the last one)
    await verdict(installs[0], 'worker', 'healthy');
    const again = await post(api, `/v1/apps/${app.app_id}/rollbacks`, { to: 'previous', approval: 'none', health_gate: { bake: '5m' } });
    await waitStep(api, again.workflow_id, 'bake install group: g1', 'started');
    clock.advance(5 * MIN);
    expect((await waitWf(api, again.workflow_id)).status).toBe('succeeded');
  });

  it('with `for: 3s` (CONTRACT 4.3 rollout policy): a verdict good again within 1 s does not trip, one bad for 3 s on the engine ' +
    'clock does; `for` over 1h is 400', {
    timeout: 90_000,
  }, async () => {
    const { app, v2, installs, branch } = await threeGroups();
    const path = `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`;
    const tooLong = await api.post(path, { app_config_id: v2.app_config_id, skip_builds: true, health_gate: { bake: '10m', for: '2h' } });
    expect(tooLong.status).toBe(400);
    expect(JSON.stringify(tooLong.body.details)).toContain('health_gate.for');
    expect((await api.post(path, { app_config_id: v2.app_config_id, health_gate: { bake: '10m', for: 'soon' } })).status).toBe(400);

    const run = await post(api, path, { app_config_id: v2.app_config_id, skip_builds: true, health_gate: { bake: '10m', for: '3s' } });
    const W = run.workflow_id;
    await approve(W, 'g1');
    await waitStep(api, W, 'bake install group: g1', 'started');
    // a blip: degraded, healthy again 900 ms later
    await verdict(installs[0], 'api', 'degraded', 'blip');
    clock.advance(900);
    await verdict(installs[0], 'api', 'healthy');
    clock.advance(5000);
    await svc.settled();
    expect((await getWf(api, W)).steps.find((s: Json) => s.name === 'bake install group: g1').status).toBe('started');
    // a real one: unhealthy and staying so; not tripped 1 s before `for`, tripped at it
    await verdict(installs[0], 'worker', 'unhealthy', 'crash loop');
    clock.advance(2000);
    await svc.settled();
    expect((await getWf(api, W)).status).toBe('started');
    clock.advance(1000);
    const done = await waitWf(api, W);
    expect(done.status).toBe('failed');
    const bake = done.steps.find((s: Json) => s.name === 'bake install group: g1');
    expect(bake.status).toBe('failed');
    expect(bake.error).toContain('crash loop');
    const events = await eventsOf(W);
    expect(events.at(-1).data.rollout).toEqual({
      run_id: W,
      trigger: 'health_gate',
      install_id: installs[0].install_id,
      component_id: componentOf(installs[0], 'worker'),
      verdict: 'unhealthy',
      reason: 'crash loop',
    });
    // the blip never reached the run's events as a cause
    expect(events.some((e) => e.data.rollout?.reason === 'blip')).toBe(false);
  });
});
