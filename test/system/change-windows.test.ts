// Change windows (CONTRACT 4.3 "Change windows", issue 29) end to end: a real svc in process on a
// ManualClock (the engine's time; the test moves it), its local runner, real SQLite and HTTP, the
// events as the store keeps them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import { startService, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { appWithThreeConfigs, get, getWf, installWith, post, waitStep, waitWf } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';
import { FakeRunner } from '../helpers/fake-runner.ts';
import { waitFor } from '../helpers/wait.ts';

type Json = any;

const cfg = (image: string) => ({ components: [{ name: 'api', values: { image } }] });
const ALL_DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

let svc: TestService;
let org: OrgCreds;
let api: ApiClient;
// Thursday 2026-11-26 12:00 UTC
const clock = new ManualClock(Date.parse('2026-11-26T12:00:00.000Z'));

beforeAll(async () => {
  svc = await startService({}, { clock });
  org = svc.createOrg('windows');
  api = svc.api(org);
}, 30_000);
afterAll(async () => {
  await svc?.stop();
});

/** An app with configs v1..v3, installs a and b provisioned on v1 (a labelled tier=enterprise), a branch with one group of both. */
async function fleet() {
  const { app, v1, v2, v3 } = await appWithThreeConfigs(api, rid('shop'), cfg);
  const a = await installWith(api, rid('acme'), app.app_id, v1.app_config_id, { tier: 'enterprise' });
  const b = await installWith(api, rid('bolt'), app.app_id, v1.app_config_id, { tier: 'free' });
  const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
    name: 'main',
    install_groups: [
      { name: 'g1', install_ids: [a.install_id, b.install_id] },
      { name: 'g2', selector: { match_labels: { tier: 'none' } } },
    ],
  });
  return { app, v1, v2, v3, a, b, branch };
}

async function approve(W: string, group: string): Promise<void> {
  const { step } = await waitStep(api, W, `plan install group: ${group}`, 'awaiting_approval');
  await post(api, `/v1/workflows/${W}/steps/${step.step_id}/approval`, { response: 'approved' }, 200);
}

const windowsOf = (appId: string) => `/v1/apps/${appId}/change-windows`;
/** The hour now on the engine's clock, as HH:00 UTC, shifted by `h`. */
const hourUtc = (h = 0) => `${String(new Date(clock.now() + h * 3_600_000).getUTCHours()).padStart(2, '0')}:00`;
const todayUtc = () => ALL_DAYS[(new Date(clock.now()).getUTCDay() + 6) % 7];

describe('change windows (CONTRACT 4.3)', () => {
  it('create, list, delete; bad input is 400 naming the field and changes nothing', async () => {
    const { app, a } = await fleet();
    const w = await post(api, windowsOf(app.app_id), {
      name: 'weekend',
      kind: 'allow',
      days: ['sun'],
      start: '02:00',
      duration: '120m',
      time_zone: 'America/Los_Angeles',
      selector: { match_labels: { tier: 'enterprise' } },
    });
    expect(w).toMatchObject({
      window_id: expect.stringMatching(/^cw_/),
      name: 'weekend',
      kind: 'allow',
      days: ['sun'],
      start: '02:00',
      duration: '120m',
      time_zone: 'America/Los_Angeles',
      install_ids: null,
      selector: { match_labels: { tier: 'enterprise' } },
      applies_to: ['branch_run'],
      created_at: expect.any(String),
    });
    for (const [body, field] of [
      [{ days: ['sunday'] }, 'days.0'],
      [{ start: '24:00' }, 'start'],
      [{ duration: '10m' }, 'duration'],
      [{ duration: '25h' }, 'duration'],
      [{ time_zone: 'Mars/Olympus' }, 'time_zone'],
      [{ kind: 'maybe' }, 'kind'],
      [{ applies_to: ['rollbacks'] }, 'applies_to.0'],
      [{ install_ids: ['ins_nope'] }, 'install_ids'],
    ] as const) {
      const r = await api.post(
        windowsOf(app.app_id),
        Object.assign({ name: 'x', kind: 'deny', days: ['mon'], start: '01:00', duration: '1h', time_zone: 'UTC' }, body),
      );
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(JSON.stringify(r.body.details)).toContain(field);
    }
    expect(
      (await api.post(windowsOf('app_nope'), { name: 'x', kind: 'deny', days: ['mon'], start: '01:00', duration: '1h', time_zone: 'UTC' }))
        .status,
    ).toBe(404);
    const ids = await post(api, windowsOf(app.app_id), {
      name: 'a only',
      kind: 'deny',
      days: ['mon'],
      start: '01:00',
      duration: '1h',
      time_zone: 'UTC',
      install_ids: [a.install_id],
      applies_to: ['branch_run', 'rollback'],
    });
    expect((await get(api, windowsOf(app.app_id))).map((x: Json) => x.window_id)).toEqual([w.window_id, ids.window_id]);
    expect((await api.del(`${windowsOf(app.app_id)}/${w.window_id}`)).status).toBe(204);
    expect((await api.del(`${windowsOf(app.app_id)}/${w.window_id}`)).status).toBe(404);
    expect((await get(api, windowsOf(app.app_id))).map((x: Json) => x.window_id)).toEqual([ids.window_id]);
  });

  it('a deny window covering now: the install waits with the right next_window_at; deleting the window starts it at once', {
    timeout: 60_000,
  }, async () => {
    const { app, v1, v2, a, b, branch } = await fleet();
    // covers now (12:xx) until the next full hour + 1
    const deny = await post(api, windowsOf(app.app_id), {
      name: 'freeze',
      kind: 'deny',
      days: [todayUtc()],
      start: hourUtc(),
      duration: '2h',
      time_zone: 'UTC',
      install_ids: [a.install_id],
    });
    const opens = new Date(Math.floor(clock.now() / 3_600_000) * 3_600_000 + 2 * 3_600_000).toISOString();
    // the plan shows when each install would start
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v2.app_config_id,
      skip_builds: true,
    });
    const W = run.workflow_id;
    const plan = (await waitStep(api, W, 'plan install group: g1', 'awaiting_approval')).step.plan;
    const byId = Object.fromEntries(plan.installs.map((i: Json) => [i.install_id, i]));
    expect(byId[a.install_id]).toMatchObject({ scheduled_at: opens, blocked_by: [deny.window_id], blocked_by_names: [deny.name] });
    expect(byId[b.install_id]).toMatchObject({ scheduled_at: new Date(clock.now()).toISOString(), blocked_by: [] });
    await approve(W, 'g1');
    const waitName = `wait for change window: ${a.name}`;
    const { step: wait } = await waitStep(api, W, waitName, 'started');
    expect(wait.execution_type).toBe('system');
    // b went ahead; a did not start
    await waitFor(async () => (await get(api, `/v1/installs/${b.install_id}`)).app_config_id === v2.app_config_id, 10_000, 'b on v2');
    expect((await get(api, `/v1/installs/${a.install_id}`)).app_config_id).toBe(v1.app_config_id);
    expect((await get(api, `/v1/installs/${a.install_id}/workflows`)).some((w: Json) => w.type === 'app_config_update')).toBe(false);
    await svc.settled();
    const started = (await svc.events(org.org_id)).find((e) => e.data?.step?.id === wait.step_id && e.data.transition === 'started');
    expect(started.data.rollout).toEqual({ install_id: a.install_id, next_window_at: opens, window_ids: [deny.window_id] });
    expect((await getWf(api, W)).steps.find((s: Json) => s.name === 'deploy install group: g1').status).toBe('started');

    // the window goes: at once (the clock has not moved) the wait ends and a's update starts
    const at = new Date(clock.now()).toISOString();
    expect((await api.del(`${windowsOf(app.app_id)}/${deny.window_id}`)).status).toBe(204);
    const now = await getWf(api, W);
    const ended = now.steps.find((s: Json) => s.name === waitName);
    expect(ended).toMatchObject({ status: 'succeeded', finished_at: at });
    const update = (await get(api, `/v1/installs/${a.install_id}/workflows`)).find((w: Json) => w.type === 'app_config_update');
    expect(update.started_at).toBe(at);
    expect((await waitWf(api, W)).status).toBe('succeeded');
    expect((await get(api, `/v1/installs/${a.install_id}`)).app_config_id).toBe(v2.app_config_id);
  });

  it('an allow window opening later: installs wait, and start when the clock reaches it', { timeout: 60_000 }, async () => {
    const { app, v2, a, b, branch } = await fleet();
    const next = Math.floor(clock.now() / 3_600_000) * 3_600_000 + 3_600_000;
    const at = new Date(next);
    const allow = await post(api, windowsOf(app.app_id), {
      name: 'nightly',
      kind: 'allow',
      days: [ALL_DAYS[(at.getUTCDay() + 6) % 7]],
      start: `${String(at.getUTCHours()).padStart(2, '0')}:00`,
      duration: '15m',
      time_zone: 'UTC',
    });
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v2.app_config_id,
      skip_builds: true,
      rollout: { max_parallel: 1 },
    });
    const W = run.workflow_id;
    await approve(W, 'g1');
    await waitStep(api, W, `wait for change window: ${a.name}`, 'started');
    // max_parallel 1: the held install leaves its slot, so b is looked at and waits too
    await waitStep(api, W, `wait for change window: ${b.name}`, 'started');
    await svc.settled();
    const waits = (await svc.events(org.org_id)).filter(
      (e) => e.data?.workflow?.id === W && e.data.step?.name.startsWith('wait for change window') && e.data.transition === 'started',
    );
    expect(waits.map((e) => e.data.rollout.next_window_at)).toEqual([at.toISOString(), at.toISOString()]);
    expect(waits[0].data.rollout.window_ids).toEqual([allow.window_id]);
    // one second short of the window: still waiting
    clock.advance(next - clock.now() - 1000);
    expect((await getWf(api, W)).steps.filter((s: Json) => s.name.startsWith('wait for')).map((s: Json) => s.status)).toEqual([
      'started',
      'started',
    ]);
    clock.advance(1000);
    const done = await waitWf(api, W);
    expect(done.status).toBe('succeeded');
    for (const s of done.steps.filter((x: Json) => x.name.startsWith('wait for')))
      expect(Date.parse(s.finished_at) - next).toBeLessThanOrEqual(1000);
    for (const i of [a, b]) expect((await get(api, `/v1/installs/${i.install_id}`)).app_config_id).toBe(v2.app_config_id);
  });

  it('window_timeout: a wait longer than it fails the group naming the install; on_failure rollback rolls back what started', {
    timeout: 60_000,
  }, async () => {
    const { app, v1, v2, a, b, branch } = await fleet();
    // never open for a: denied all day every day
    await post(api, windowsOf(app.app_id), {
      name: 'never',
      kind: 'deny',
      days: ALL_DAYS,
      start: '00:00',
      duration: '24h',
      time_zone: 'Europe/Berlin',
      selector: { match_labels: { tier: 'enterprise' } },
    });
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v2.app_config_id,
      skip_builds: true,
      rollout: { window_timeout: '1m', on_failure: 'rollback' },
    });
    const W = run.workflow_id;
    await approve(W, 'g1');
    const { step: wait } = await waitStep(api, W, `wait for change window: ${a.name}`, 'started');
    await waitFor(async () => (await get(api, `/v1/installs/${b.install_id}`)).app_config_id === v2.app_config_id, 10_000, 'b on v2');
    await svc.settled();
    const started = (await svc.events(org.org_id)).find((e) => e.data?.step?.id === wait.step_id && e.data.transition === 'started');
    expect(started.data.rollout.next_window_at).toBeNull();
    clock.advance(60_000);
    expect((await getWf(api, W)).steps.find((s: Json) => s.step_id === wait.step_id).status).toBe('started');
    clock.advance(1000);
    const done = await waitWf(api, W);
    expect(done.status).toBe('failed');
    expect(done.steps.slice(1).map((s: Json) => [s.name, s.status])).toEqual([
      ['plan install group: g1', 'succeeded'],
      ['deploy install group: g1', 'failed'],
      [`wait for change window: ${a.name}`, 'failed'],
      ['plan install group: g2', 'cancelled'],
      ['deploy install group: g2', 'cancelled'],
      ['rollback install group: g1', 'succeeded'],
    ]);
    expect(done.steps[2].error).toContain(`${a.name} (${a.install_id})`);
    await svc.settled();
    const last = (await svc.events(org.org_id)).filter((e) => e.data?.workflow?.id === W).at(-1);
    expect(last.data).toMatchObject({
      kind: 'workflow',
      transition: 'failed',
      rollout: { run_id: W, trigger: 'window_timeout', install_ids: [a.install_id] },
    });
    // b, whose update started, is back on v1; a never left it
    for (const i of [a, b]) expect((await get(api, `/v1/installs/${i.install_id}`)).app_config_id).toBe(v1.app_config_id);
  });

  it('a fleet rollback passes a deny window unless applies_to names it', { timeout: 60_000 }, async () => {
    const { app, v1, v2, a } = await fleet();
    await post(api, `/v1/installs/${a.install_id}/app-config-updates`, { app_config_id: v2.app_config_id }).then((u) =>
      waitWf(api, u.workflow_id),
    );
    const deny = await post(api, windowsOf(app.app_id), {
      name: 'freeze',
      kind: 'deny',
      days: ALL_DAYS,
      start: '00:00',
      duration: '24h',
      time_zone: 'UTC',
    });
    const planned = await post(
      api,
      `/v1/apps/${app.app_id}/rollbacks`,
      { to: 'previous', install_ids: [a.install_id], plan_only: true },
      200,
    );
    expect(planned.plan.installs[0]).toMatchObject({
      install_id: a.install_id,
      scheduled_at: new Date(clock.now()).toISOString(),
      blocked_by: [],
      blocked_by_names: [],
    });
    const rb = await post(api, `/v1/apps/${app.app_id}/rollbacks`, { to: 'previous', install_ids: [a.install_id], approval: 'none' });
    expect((await waitWf(api, rb.workflow_id)).status).toBe('succeeded');
    expect((await get(api, `/v1/installs/${a.install_id}`)).app_config_id).toBe(v1.app_config_id);

    // named: the rollback waits for it
    await post(api, `/v1/installs/${a.install_id}/app-config-updates`, { app_config_id: v2.app_config_id }).then((u) =>
      waitWf(api, u.workflow_id),
    );
    expect((await api.del(`${windowsOf(app.app_id)}/${deny.window_id}`)).status).toBe(204);
    const named = await post(api, windowsOf(app.app_id), {
      name: 'freeze all',
      kind: 'deny',
      days: ALL_DAYS,
      start: '00:00',
      duration: '24h',
      time_zone: 'UTC',
      applies_to: ['rollback'],
    });
    const planned2 = await post(
      api,
      `/v1/apps/${app.app_id}/rollbacks`,
      { to: 'previous', install_ids: [a.install_id], plan_only: true },
      200,
    );
    expect(planned2.plan.installs[0]).toMatchObject({
      scheduled_at: null,
      blocked_by: [named.window_id],
      blocked_by_names: ['freeze all'],
    });
    const rb2 = await post(api, `/v1/apps/${app.app_id}/rollbacks`, { to: 'previous', install_ids: [a.install_id], approval: 'none' });
    await waitStep(api, rb2.workflow_id, `wait for change window: ${a.name}`, 'started');
    expect((await get(api, `/v1/installs/${a.install_id}`)).app_config_id).toBe(v2.app_config_id);
    expect((await api.del(`${windowsOf(app.app_id)}/${named.window_id}`)).status).toBe(204);
    expect((await waitWf(api, rb2.workflow_id)).status).toBe('succeeded');
    expect((await get(api, `/v1/installs/${a.install_id}`)).app_config_id).toBe(v1.app_config_id);
  });
});

describe('change windows across a restart', () => {
  it("an install waiting for a window when svc stops starts when the restarted svc's clock reaches the window", {
    timeout: 60_000,
  }, async () => {
    const c1 = new ManualClock(Date.parse('2026-07-11T19:00:00.000Z')); // Saturday noon in Los Angeles (PDT)
    const svc1 = await startService({}, { clock: c1 });
    const o = svc1.createOrg('windows-restart');
    const api1 = svc1.api(o);
    const { app, v1, v2 } = await appWithThreeConfigs(api1, rid('shop'), cfg);
    const inst = await installWith(api1, rid('acme'), app.app_id, v1.app_config_id);
    const branch = await post(api1, `/v1/apps/${app.app_id}/branches`, {
      name: 'main',
      install_groups: [{ name: 'g1', install_ids: [inst.install_id] }],
    });
    await post(api1, windowsOf(app.app_id), {
      name: 'sunday',
      kind: 'allow',
      days: ['sun'],
      start: '02:00',
      duration: '2h',
      time_zone: 'America/Los_Angeles',
    });
    const run = await post(api1, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v2.app_config_id,
      skip_builds: true,
      rollout: { window_timeout: '2d' },
    });
    const { step } = await waitStep(api1, run.workflow_id, 'plan install group: g1', 'awaiting_approval');
    await post(api1, `/v1/workflows/${run.workflow_id}/steps/${step.step_id}/approval`, { response: 'approved' }, 200);
    await waitStep(api1, run.workflow_id, `wait for change window: ${inst.name}`, 'started');
    await svc1.settled();
    const waiting = (await svc1.events(o.org_id)).find((e) => e.data?.step?.name === `wait for change window: ${inst.name}`);
    expect(waiting.data.rollout.next_window_at).toBe('2026-07-12T09:00:00.000Z'); // Sunday 02:00 PDT
    await svc1.stop();

    const c2 = new ManualClock(c1.now());
    const svc2 = await startService({ db: svc1.db }, { clock: c2 });
    try {
      const api2 = svc2.api(o);
      c2.advance(Date.parse('2026-07-12T09:00:00.000Z') - c2.now() - 2000);
      expect((await getWf(api2, run.workflow_id)).steps.find((x: Json) => x.name.startsWith('wait for')).status).toBe('started');
      c2.advance(3000);
      const done = await waitWf(api2, run.workflow_id);
      expect(done.status).toBe('succeeded');
      const wait = done.steps.find((x: Json) => x.name.startsWith('wait for'));
      expect(Date.parse(wait.finished_at) - Date.parse('2026-07-12T09:00:00.000Z')).toBeLessThanOrEqual(1000);
      expect((await get(api2, `/v1/installs/${inst.install_id}`)).app_config_id).toBe(v2.app_config_id);
    } finally {
      await svc2.stop();
    }
  });
});

describe('an update that started inside a window', () => {
  it('finishes after the window closes (nothing stops it)', { timeout: 60_000 }, async () => {
    const c = new ManualClock(Date.parse('2026-11-26T12:00:00.000Z'));
    const s = await startService({ localRunner: false }, { clock: c });
    const runner = new FakeRunner(s.server.bus);
    try {
      const o = s.createOrg('windows-inside');
      const a1 = s.api(o);
      const { app, v1, v2 } = await appWithThreeConfigs(a1, rid('shop'), cfg);
      const inst = await installWith(a1, rid('acme'), app.app_id, v1.app_config_id);
      const branch = await post(a1, `/v1/apps/${app.app_id}/branches`, {
        name: 'main',
        install_groups: [{ name: 'g1', install_ids: [inst.install_id] }],
      });
      await post(a1, windowsOf(app.app_id), {
        name: 'noon',
        kind: 'allow',
        days: ['thu'],
        start: '12:00',
        duration: '15m',
        time_zone: 'UTC',
      });
      runner.holdWhen((job) => job.app_config_id === v2.app_config_id);
      const run = await post(a1, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
        app_config_id: v2.app_config_id,
        skip_builds: true,
      });
      const { step } = await waitStep(a1, run.workflow_id, 'plan install group: g1', 'awaiting_approval');
      await post(a1, `/v1/workflows/${run.workflow_id}/steps/${step.step_id}/approval`, { response: 'approved' }, 200);
      await waitFor(async () => runner.held.some((j) => j.install_id === inst.install_id), 10_000, 'the update running');
      const [job] = runner.held;
      await runner.send(job, [{ status: 'started' }]);
      await runner.idle();
      c.advance(20 * 60_000); // the window closed 5 minutes ago
      expect((await getWf(a1, run.workflow_id)).status).toBe('started');
      await runner.send(job, [{ status: 'succeeded' }]);
      const done = await waitWf(a1, run.workflow_id);
      expect(done.status).toBe('succeeded');
      expect(done.steps.some((x: Json) => x.name.startsWith('wait for'))).toBe(false);
      expect((await get(a1, `/v1/installs/${inst.install_id}`)).app_config_id).toBe(v2.app_config_id);
    } finally {
      runner.stop();
      await s.stop();
    }
  });
});
