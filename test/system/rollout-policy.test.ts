// Rollout policy (CONTRACT 4.3 "Rollout policy", issue 29): max_parallel, the failure budget and
// on_failure, driven as a user drives them: a real svc in process with an external runner (the
// test's FakeRunner holds each config update's job and answers it when the test says), real
// SQLite, real HTTP, the events as a webhook gets them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { FakeRunner, type Job } from '../helpers/fake-runner.ts';
import { get, post, waitStep, waitWf } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';

type Json = any;

const cfg = (image: string) => ({ components: [{ name: 'api', values: { image } }] });

let svc: TestService;
let org: OrgCreds;
let api: ApiClient;
let runner: FakeRunner;

beforeAll(async () => {
  svc = await startService({ localRunner: false });
  org = svc.createOrg('rollout-policy');
  api = svc.api(org);
  runner = new FakeRunner(svc.server.bus);
});
afterAll(async () => {
  runner?.stop();
  await svc?.stop();
});

/** An app with configs v1 and v2, `n` installs per group provisioned on v1 (created in order), and a branch over the groups. */
async function fleet(groups: number[]) {
  const app = await post(api, '/v1/apps', { name: rid('app') });
  const v1 = await post(api, `/v1/apps/${app.app_id}/configs`, cfg('api:1'));
  const v2 = await post(api, `/v1/apps/${app.app_id}/configs`, cfg('api:2'));
  const byGroup: Json[][] = [];
  for (const [g, n] of groups.entries()) {
    const installs: Json[] = [];
    for (let i = 0; i < n; i++) {
      const install = await post(api, '/v1/installs', {
        app_id: app.app_id,
        name: rid(`g${g + 1}`),
        labels: { ring: `g${g + 1}` },
        app_config_id: v1.app_config_id,
      });
      const [prov] = await get(api, `/v1/installs/${install.install_id}/workflows`);
      expect((await waitWf(api, prov.workflow_id)).status).toBe('succeeded');
      installs.push(install);
    }
    byGroup.push(installs);
  }
  const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
    name: 'main',
    install_groups: byGroup.map((installs, g) => ({ name: `g${g + 1}`, install_ids: installs.map((i) => i.install_id) })),
  });
  return { app, v1, v2, groups: byGroup, branch };
}

/** The jobs of v2's config updates, held; answered with `fail` for the installs in it. */
function holdUpdatesTo(v2: Json): void {
  runner.holdWhen((job) => job.app_config_id === v2.app_config_id);
}

async function approve(W: string, group: string): Promise<void> {
  const { step } = await waitStep(api, W, `plan install group: ${group}`, 'awaiting_approval');
  await post(api, `/v1/workflows/${W}/steps/${step.step_id}/approval`, { response: 'approved' }, 200);
}

/** Held jobs of these installs not yet answered: their config updates running now. */
const heldOf = (ids: string[], answered: Set<string>) => runner.held.filter((j) => ids.includes(j.install_id!) && !answered.has(j.job_id));

describe('rollout policy (CONTRACT 4.3)', () => {
  it('max_parallel 2 over 8 installs: never more than 2 updates running, started in install order, all succeed', {
    timeout: 120_000,
  }, async () => {
    const { app, v2, groups, branch } = await fleet([8]);
    holdUpdatesTo(v2);
    const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
      app_config_id: v2.app_config_id,
      skip_builds: true,
      rollout: { max_parallel: 2 },
    });
    const W = run.workflow_id;
    await approve(W, 'g1');
    const answered = new Set<string>();
    const ids = groups[0].map((i: Json) => i.install_id);
    const order: string[] = [];
    let peak = 0;
    while (answered.size < 8) {
      await waitFor(() => heldOf(ids, answered).length > 0, 10_000, 'an update running');
      await runner.idle();
      const running = heldOf(ids, answered);
      peak = Math.max(peak, running.length);
      const job = running[0];
      answered.add(job.job_id);
      order.push(job.install_id!);
      await runner.finish(job);
    }
    const done = await waitWf(api, W);
    expect(done.status).toBe('succeeded');
    expect(peak).toBe(2);
    expect(order).toEqual(groups[0].map((i) => i.install_id));
    for (const i of groups[0]) expect((await get(api, `/v1/installs/${i.install_id}`)).app_config_id).toBe(v2.app_config_id);
  });

  it('budget 20 % of 10: 1 failure → the group succeeds and its events list it; 3 failures → it fails and the later group is cancelled', {
    timeout: 120_000,
  }, async () => {
    // one failure within the budget
    const a = await fleet([10]);
    holdUpdatesTo(a.v2);
    const runA = await post(api, `/v1/apps/${a.app.app_id}/branches/${a.branch.app_branch_id}/runs`, {
      app_config_id: a.v2.app_config_id,
      skip_builds: true,
      rollout: { failure_budget: { max_failed_pct: 20 } },
    });
    await approve(runA.workflow_id, 'g1');
    await waitFor(
      () => runner.held.filter((j) => a.groups[0].some((i: Json) => i.install_id === j.install_id)).length === 10,
      10_000,
      'all 10 updates running',
    );
    const jobsA = runner.held.filter((j) => a.groups[0].some((i: Json) => i.install_id === j.install_id));
    const failing = jobsA[3];
    for (const j of jobsA) {
      if (j === failing) await runner.send(j, [{ status: 'started' }, { status: 'failed', error: 'disk full' }]);
      else await runner.finish(j);
    }
    const doneA = await waitWf(api, runA.workflow_id);
    expect(doneA.status).toBe('succeeded');
    await svc.settled();
    const deployA = doneA.steps.find((s: Json) => s.name === 'deploy install group: g1');
    const eventsA = (await svc.events(org.org_id)).filter((e) => e.data?.step?.id === deployA.step_id);
    const succeeded = eventsA.find((e) => e.data.transition === 'succeeded');
    const [failedChild] = await get(api, `/v1/installs/${failing.install_id}/workflows`);
    expect(succeeded.data.rollout).toEqual({
      run_id: runA.workflow_id,
      failed_installs: [
        { install_id: failing.install_id, workflow_id: failedChild.workflow_id, error: expect.stringContaining('disk full') },
      ],
    });

    // three failures: over the budget of 2; the second group never starts
    const b = await fleet([10, 1]);
    holdUpdatesTo(b.v2);
    const runB = await post(api, `/v1/apps/${b.app.app_id}/branches/${b.branch.app_branch_id}/runs`, {
      app_config_id: b.v2.app_config_id,
      skip_builds: true,
      rollout: { failure_budget: { max_failed_pct: 20 } },
    });
    await approve(runB.workflow_id, 'g1');
    await waitFor(
      () => runner.held.filter((j) => b.groups[0].some((i: Json) => i.install_id === j.install_id)).length === 10,
      10_000,
      'all 10 updates running',
    );
    const jobsB = runner.held.filter((j) => b.groups[0].some((i: Json) => i.install_id === j.install_id));
    for (const [n, j] of jobsB.entries()) {
      if (n < 3) await runner.send(j, [{ status: 'started' }, { status: 'failed', error: `broken ${n}` }]);
      else await runner.finish(j);
    }
    const doneB = await waitWf(api, runB.workflow_id);
    expect(doneB.status).toBe('failed');
    expect(doneB.steps.map((s: Json) => [s.name, s.status]).slice(-3)).toEqual([
      ['deploy install group: g1', 'failed'],
      ['plan install group: g2', 'cancelled'],
      ['deploy install group: g2', 'cancelled'],
    ]);
    expect(doneB.steps.find((s: Json) => s.name === 'deploy install group: g1').error).toMatch(
      /^3 of 10 installs did not apply the config/,
    );
    await svc.settled();
    const lastB = (await svc.events(org.org_id)).filter((e) => e.data?.workflow?.id === runB.workflow_id).at(-1);
    expect(lastB.data).toMatchObject({
      kind: 'workflow',
      transition: 'failed',
      rollout: { run_id: runB.workflow_id, trigger: 'deploy_failed' },
    });
    expect(lastB.data.rollout.failed_installs.map((f: Json) => f.error)).toEqual(
      ['broken 0', 'broken 1', 'broken 2'].map((e) => expect.stringContaining(e)),
    );
    expect((await get(api, `/v1/installs/${b.groups[1][0].install_id}`)).app_config_id).toBe(b.v1.app_config_id);
  });

  it('on_failure rollback: the failing group (over budget, max_parallel 2) and the group before it return to their configs before ' +
    'the run; installs never started stay; trigger deploy_failed', {
    timeout: 120_000,
  }, async () => {
    const f = await fleet([2, 5]);
    holdUpdatesTo(f.v2);
    const run = await post(api, `/v1/apps/${f.app.app_id}/branches/${f.branch.app_branch_id}/runs`, {
      app_config_id: f.v2.app_config_id,
      skip_builds: true,
      rollout: { max_parallel: 2, failure_budget: { max_failed_pct: 20 }, on_failure: 'rollback' },
    });
    const W = run.workflow_id;
    await approve(W, 'g1');
    const answered = new Set<string>();
    const answer = async (j: Job, ok: boolean) => {
      answered.add(j.job_id);
      await (ok ? runner.finish(j) : runner.send(j, [{ status: 'started' }, { status: 'failed', error: 'crash' }]));
    };
    const g1 = f.groups[0].map((i: Json) => i.install_id);
    for (let n = 0; n < 2; n++) {
      await waitFor(() => heldOf(g1, answered).length > 0, 10_000, 'a g1 update');
      await answer(heldOf(g1, answered)[0], true);
    }
    await approve(W, 'g2');
    // g2 (5 installs, budget floor(5 × 20 %) = 1): the first fails, the second succeeds, the third fails: over
    const g2 = f.groups[1].map((i: Json) => i.install_id);
    const plan = [false, true, false];
    for (const ok of plan) {
      await waitFor(() => heldOf(g2, answered).length > 0, 10_000, 'a g2 update');
      await runner.idle();
      await answer(heldOf(g2, answered)[0], ok);
    }
    // the one still running when the budget ran out finishes; nothing new starts
    await runner.idle();
    const stillRunning = heldOf(g2, answered);
    expect(stillRunning).toHaveLength(1);
    runner.holdWhen(() => false); // the rollbacks' updates go through
    await answer(stillRunning[0], true);
    const done = await waitWf(api, W);
    expect(done.status).toBe('failed');
    const started = g2.slice(0, 4);
    const rb = done.steps.filter((s: Json) => s.name.startsWith('rollback'));
    expect(rb.map((s: Json) => [s.name, s.status])).toEqual([
      ['rollback install group: g2', 'succeeded'],
      ['rollback install group: g1', 'succeeded'],
    ]);
    for (const id of [...f.groups[0].map((i: Json) => i.install_id), ...started])
      expect((await get(api, `/v1/installs/${id}`)).app_config_id, id).toBe(f.v1.app_config_id);
    for (const id of g2.slice(4))
      expect(
        (await get(api, `/v1/installs/${id}/workflows`)).map((w: Json) => w.type),
        id,
      ).toEqual(['provision']);
    await svc.settled();
    const events = (await svc.events(org.org_id)).filter((e) => e.data?.workflow?.id === W);
    expect(events.at(-1).data.rollout).toMatchObject({ run_id: W, trigger: 'deploy_failed' });
    expect(events.at(-1).data.rollout.failed_installs).toHaveLength(2);
  });

  it(
    'validation: max_parallel 0, a budget over 100, an unknown on_failure, a window_timeout under 1m are 400 naming the field; ' +
      'nothing starts',
    async () => {
      const { app, v2, branch, groups } = await fleet([1]);
      const path = `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`;
      for (const [rollout, field] of [
        [{ max_parallel: 0 }, 'rollout.max_parallel'],
        [{ failure_budget: { max_failed_pct: 101 } }, 'rollout.failure_budget.max_failed_pct'],
        [{ on_failure: 'panic' }, 'rollout.on_failure'],
        [{ window_timeout: '30s' }, 'rollout.window_timeout'],
        [{ batches: 2 }, 'rollout'],
      ] as const) {
        const r = await api.post(path, { app_config_id: v2.app_config_id, rollout });
        expect(r.status, JSON.stringify(rollout)).toBe(400);
        expect(JSON.stringify(r.body.details)).toContain(field);
      }
      const fleetPath = `/v1/apps/${app.app_id}/rollbacks`;
      expect((await api.post(fleetPath, { to: 'previous', rollout: { max_parallel: 1001 } })).status).toBe(400);
      expect((await get(api, `/v1/installs/${groups[0][0].install_id}/workflows`)).map((w: Json) => w.type)).toEqual(['provision']);
    },
  );

  it('on_failure rollback applies to a health gate that trips too (its action left at halt)', { timeout: 60_000 }, async () => {
    runner.holdWhen(() => false);
    const f = await fleet([1]);
    const run = await post(api, `/v1/apps/${f.app.app_id}/branches/${f.branch.app_branch_id}/runs`, {
      app_config_id: f.v2.app_config_id,
      skip_builds: true,
      health_gate: { bake: '1h', action: 'halt' },
      rollout: { on_failure: 'rollback' },
    });
    await approve(run.workflow_id, 'g1');
    await waitStep(api, run.workflow_id, 'bake install group: g1', 'started');
    const install = await get(api, `/v1/installs/${f.groups[0][0].install_id}`);
    const r = await svc.server.bus.request(
      `svc.ingest.${org.org_id}.health.${install.install_id}`,
      JSON.stringify({ component_id: install.components[0].component_id, verdict: 'unhealthy', reason: 'oom' }),
      { timeoutMs: 5000 },
    );
    expect(r.json()).toMatchObject({ ok: true });
    const done = await waitWf(api, run.workflow_id);
    expect(done.steps.map((s: Json) => [s.name, s.status]).at(-1)).toEqual(['rollback install group: g1', 'succeeded']);
    expect((await get(api, `/v1/installs/${install.install_id}`)).app_config_id).toBe(f.v1.app_config_id);
  });
});
