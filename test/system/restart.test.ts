// Workflows survive a restart of svc (CONTRACT 1, 4.3, 5.2; spec 1, 3): a branch run that waits for
// an approval, stopped gracefully or killed with SIGKILL, is approved after a restart on the same
// SQLite file and completes; a job in flight across a restart is answered afterwards (or sent
// again) and the workflow carries on. A recording receiver with an all-events webhook must see each
// logical event (CloudEvents subject) exactly once across both processes.
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDb } from '../../store/db.ts';
import { createOrg } from '../../store/orgs.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { children, childSettled, spawnService, type ChildService } from '../helpers/child-service.ts';
import { apiClient, startService, tmpDir, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { FakeRunner } from '../helpers/fake-runner.ts';
import { emittedByAll, getWf, post, waitStep, waitWf } from '../helpers/workflows.ts';
import { ManualClock } from '../helpers/clock.ts';
import { JOB_RESEND_MS } from '../../src/engine/engine.ts';
import { rid } from '../helpers/ids.ts';

type Json = any;

// ---------------------------------------------------------------------------------------------
// helpers

/** CloudEvents subjects in the outbox (committed, not yet delivered), through a read-only connection. */
function outboxSubjects(db: string, orgId: string): string[] {
  const h = new Database(db, { readonly: true, fileMustExist: true });
  try {
    return (h.prepare('SELECT body FROM outbox WHERE org_id = ? ORDER BY seq').all(orgId) as Array<{ body: string }>).map(
      (r) => JSON.parse(r.body).subject as string,
    );
  } finally {
    h.close();
  }
}

function counts(subjects: string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const s of subjects) m.set(s, (m.get(s) ?? 0) + 1);
  return m;
}

/**
 * Every event the org's workflows emitted (as the API shows them: emittedByAll) reached the
 * receiver exactly once, and nothing else did. Waits for the deliveries, then until the service
 * has delivered everything it committed (`settled`): a late duplicate would have arrived by then.
 */
async function expectDeliveredExactlyOnce(
  rcv: Receiver,
  hook: string,
  api: ApiClient,
  orgId: string,
  ids: { installs?: string[]; workflows?: string[] },
  settled: () => Promise<void>,
): Promise<string[]> {
  const emitted = await emittedByAll(api, orgId, ids);
  expect(new Set(emitted).size, 'no logical event twice').toBe(emitted.length);
  await waitFor(() => new Set(rcv.subjects(hook)).size >= emitted.length, 10_000, `${emitted.length} deliveries`);
  await settled();
  const got = rcv.subjects(hook);
  const dup = [...counts(got)].filter(([, n]) => n > 1).map(([s]) => s);
  expect(dup, 'delivered more than once').toEqual([]);
  expect([...got].sort()).toEqual([...emitted].sort());
  return got;
}

const V1 = {
  sandbox: { size: 'small' },
  components: [
    { name: 'api', values: { image: 'api:1' } },
    { name: 'worker', values: { image: 'worker:1' } },
  ],
};
const V2 = {
  sandbox: { size: 'small' },
  components: [
    { name: 'api', values: { image: 'api:2' } },
    { name: 'worker', values: { image: 'worker:1' } },
  ],
};

/**
 * An app with configs v1 and v2, one install provisioned on v2, an all-events webhook, a branch with
 * one group holding the install, and a branch run back to v1 (skip_builds) waiting for the group's
 * approval.
 */
async function branchRunWaitingForApproval(api: ApiClient, rcv: Receiver, hook: string) {
  await post(api, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook(hook) });
  const app = await post(api, '/v1/apps', { name: rid('app') });
  const v1 = await post(api, `/v1/apps/${app.app_id}/configs`, V1);
  const v2 = await post(api, `/v1/apps/${app.app_id}/configs`, V2);
  const install = await post(api, '/v1/installs', { app_id: app.app_id, name: rid('inst'), app_config_id: v2.app_config_id });
  const prov = (await api.get(`/v1/installs/${install.install_id}/workflows`)).body[0];
  expect((await waitWf(api, prov.workflow_id)).status).toBe('succeeded');
  const branch = await post(api, `/v1/apps/${app.app_id}/branches`, {
    name: 'main',
    install_groups: [{ name: 'all', install_ids: [install.install_id] }],
  });
  const run = await post(api, `/v1/apps/${app.app_id}/branches/${branch.app_branch_id}/runs`, {
    app_config_id: v1.app_config_id,
    skip_builds: true,
  });
  const { step: plan } = await waitStep(api, run.workflow_id, 'plan install group: all', 'awaiting_approval');
  return { app, v1, v2, install, run, plan };
}

/** After approval: the run and its child succeeded, the install is on v1 with a second version. */
async function expectRolledBack(api: ApiClient, ctx: { install: Json; run: Json; v1: Json; v2: Json }) {
  const wf = await waitWf(api, ctx.run.workflow_id);
  expect(wf.status, wf.error).toBe('succeeded');
  expect(wf.steps.map((s: Json) => [s.name, s.status])).toEqual([
    ['build components', 'succeeded'],
    ['plan install group: all', 'succeeded'],
    ['deploy install group: all', 'succeeded'],
  ]);
  const wfs = (await api.get(`/v1/installs/${ctx.install.install_id}/workflows`)).body;
  expect(wfs.map((w: Json) => w.type)).toEqual(['app_config_update', 'provision']);
  expect(wfs[0].status).toBe('succeeded');
  expect(wfs[0].parent).toEqual({ workflow_id: ctx.run.workflow_id, step_id: wf.steps[2].step_id, kind: 'workflow_step' });
  const child = await getWf(api, wfs[0].workflow_id);
  expect(child.steps.map((s: Json) => [s.name, s.status])).toEqual([['deploy api', 'succeeded']]);
  const versions = (await api.get(`/v1/installs/${ctx.install.install_id}/app-config-versions`)).body;
  expect(versions.map((v: Json) => [v.version, v.app_config_id, v.old_app_config_id, v.status])).toEqual([
    [2, ctx.v1.app_config_id, ctx.v2.app_config_id, 'succeeded'],
    [1, ctx.v2.app_config_id, null, 'succeeded'],
  ]);
  expect((await api.get(`/v1/installs/${ctx.install.install_id}`)).body.app_config_id).toBe(ctx.v1.app_config_id);
  return { wf, child };
}

/** The expected logical events of the run (branch run + child), as a set of subjects. */
function runSubjects(orgId: string, run: Json, child: Json): string[] {
  const W = run.workflow_id;
  const [, plan, deploy] = run.steps;
  const C = child.workflow_id;
  const [cdeploy] = child.steps;
  return [
    `${orgId}/workflow/${W}/started`,
    `${orgId}/workflow_step/${W}/${plan.step_id}/started`,
    `${orgId}/workflow_step_approval/${W}/${plan.step_id}/requested`,
    `${orgId}/workflow_step_approval/${W}/${plan.step_id}/approved`,
    `${orgId}/workflow_step/${W}/${plan.step_id}/succeeded`,
    `${orgId}/workflow_step/${W}/${deploy.step_id}/started`,
    `${orgId}/workflow/${C}/started`,
    `${orgId}/workflow_step/${C}/${cdeploy.step_id}/started`,
    `${orgId}/workflow_step/${C}/${cdeploy.step_id}/succeeded`,
    `${orgId}/workflow/${C}/succeeded`,
    `${orgId}/workflow_step/${W}/${deploy.step_id}/succeeded`,
    `${orgId}/workflow/${W}/succeeded`,
  ];
}

// ---------------------------------------------------------------------------------------------

const services: TestService[] = [];
let rcv: Receiver;

beforeEach(async () => {
  rcv = await startReceiver();
});
afterEach(async () => {
  for (const s of services.splice(0)) await s.stop().catch(() => {});
  await rcv?.close();
});
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

describe('a branch run waiting for approval survives a restart', () => {
  it('graceful: svc.stop(), restart on the same database, approve; the run completes and every event is delivered once', async () => {
    const svc1 = await startService();
    services.push(svc1);
    const org = svc1.createOrg('restart');
    const api1 = svc1.api(org);
    const ctx = await branchRunWaitingForApproval(api1, rcv, 'all');
    const requested = `${org.org_id}/workflow_step_approval/${ctx.run.workflow_id}/${ctx.plan.step_id}/requested`;
    await waitFor(() => rcv.subjects('all').includes(requested), 5000, 'the approval request delivery');
    const beforeStop = await expectDeliveredExactlyOnce(
      rcv,
      'all',
      api1,
      org.org_id,
      { installs: [ctx.install.install_id], workflows: [ctx.run.workflow_id] },
      () => svc1.settled(),
    );
    await svc1.stop();
    services.splice(services.indexOf(svc1), 1);

    const svc2 = await startService({ db: svc1.db });
    services.push(svc2);
    expect(svc2.url).not.toBe(svc1.url);
    const api2 = svc2.api(org);
    // the state survived: still waiting, with its plan
    const waiting = await getWf(api2, ctx.run.workflow_id);
    expect(waiting.status).toBe('started');
    expect(waiting.steps.map((s: Json) => s.status)).toEqual(['succeeded', 'awaiting_approval', 'pending']);
    expect(waiting.steps[1].plan.installs.map((i: Json) => i.install_id)).toEqual([ctx.install.install_id]);
    await svc2.settled(); // whatever the restart would deliver again is delivered by now
    expect(rcv.subjects('all'), 'a restart alone delivers nothing again').toEqual(beforeStop);

    const approved = await api2.post(`/v1/workflows/${ctx.run.workflow_id}/steps/${ctx.plan.step_id}/approval`, {
      response: 'approved',
      note: 'after restart',
    });
    expect(approved.status, approved.text).toBe(200);
    const { wf, child } = await expectRolledBack(api2, ctx);
    const got = await expectDeliveredExactlyOnce(
      rcv,
      'all',
      api2,
      org.org_id,
      { installs: [ctx.install.install_id], workflows: [ctx.run.workflow_id] },
      () => svc2.settled(),
    );
    expect(got).toEqual(expect.arrayContaining(runSubjects(org.org_id, wf, child)));
    // the skipped build step never emitted
    expect(got.filter((s) => s.includes(wf.steps[0].step_id))).toEqual([]);
    // a second approval is a conflict, on the new process too
    expect(
      (await api2.post(`/v1/workflows/${ctx.run.workflow_id}/steps/${ctx.plan.step_id}/approval`, { response: 'approved' })).status,
    ).toBe(409);
  });

  it('abrupt: `svc serve` killed with SIGKILL while the step awaits approval; restarted on the same file, approved, completes once', {
    timeout: 60_000,
  }, async () => {
    const db = path.join(tmpDir('svc-restart-'), 'svc.db');
    const h = openDb(db);
    const created = createOrg(h, 'restart-kill');
    h.close();
    const org: OrgCreds = { org_id: created.org.org_id, api_token: created.api_token };

    const child = await spawnSvc(db);
    const api1 = apiClient(child.url, org);
    const ctx = await branchRunWaitingForApproval(api1, rcv, 'all');
    const requested = `${org.org_id}/workflow_step_approval/${ctx.run.workflow_id}/${ctx.plan.step_id}/requested`;
    await waitFor(() => rcv.subjects('all').includes(requested), 5000, 'the approval request delivery');
    const beforeKill = await expectDeliveredExactlyOnce(
      rcv,
      'all',
      api1,
      org.org_id,
      { installs: [ctx.install.install_id], workflows: [ctx.run.workflow_id] },
      () => childSettled(db),
    );

    child.proc.kill('SIGKILL');
    const exit = await child.exited;
    expect(exit.signal).toBe('SIGKILL');

    const svc2 = await startService({ db });
    services.push(svc2);
    const api2 = svc2.api(org);
    const waiting = await getWf(api2, ctx.run.workflow_id);
    expect(waiting.steps.map((s: Json) => s.status)).toEqual(['succeeded', 'awaiting_approval', 'pending']);
    await svc2.settled();
    expect(rcv.subjects('all')).toEqual(beforeKill);

    const approved = await api2.post(`/v1/workflows/${ctx.run.workflow_id}/steps/${ctx.plan.step_id}/approval`, { response: 'approved' });
    expect(approved.status, approved.text).toBe(200);
    const { wf, child: cwf } = await expectRolledBack(api2, ctx);
    const got = await expectDeliveredExactlyOnce(
      rcv,
      'all',
      api2,
      org.org_id,
      { installs: [ctx.install.install_id], workflows: [ctx.run.workflow_id] },
      () => svc2.settled(),
    );
    expect(got).toEqual(expect.arrayContaining(runSubjects(org.org_id, wf, cwf)));
  });
});

describe('stopping right after a commit', () => {
  it("events committed just before svc.stop() are delivered once: by the stop's drain or after the restart", async () => {
    const svc1 = await startService();
    services.push(svc1);
    const org = svc1.createOrg('stop-after-commit');
    const api1 = svc1.api(org);
    const ctx = await branchRunWaitingForApproval(api1, rcv, 'all');
    await expectDeliveredExactlyOnce(
      rcv,
      'all',
      api1,
      org.org_id,
      { installs: [ctx.install.install_id], workflows: [ctx.run.workflow_id] },
      () => svc1.settled(),
    );

    // the cancel commits its events; the stop begins before anything had a chance to publish them
    svc1.server.ctx.engine.cancelWorkflow(org.org_id, ctx.run.workflow_id);
    await svc1.stop();
    services.splice(services.indexOf(svc1), 1);

    const cancelled = [
      `${org.org_id}/workflow_step/${ctx.run.workflow_id}/${ctx.plan.step_id}/cancelled`,
      `${org.org_id}/workflow/${ctx.run.workflow_id}/cancelled`,
    ];
    // delivered during the stop's drain, or left in the outbox for the next start: never lost
    const left = outboxSubjects(svc1.db, org.org_id);
    for (const c of cancelled) expect(left.includes(c) || rcv.subjects('all').includes(c), c).toBe(true);
    const svc2 = await startService({ db: svc1.db });
    services.push(svc2);
    const got = await expectDeliveredExactlyOnce(
      rcv,
      'all',
      svc2.api(org),
      org.org_id,
      { installs: [ctx.install.install_id], workflows: [ctx.run.workflow_id] },
      () => svc2.settled(),
    );
    expect(got).toEqual(expect.arrayContaining(cancelled));
  });
});

describe('a job in flight across a restart (localRunner: false)', () => {
  it('a started job, answered after the restart: the step succeeds and the workflow carries on', async () => {
    const svc1 = await startService({ localRunner: false });
    services.push(svc1);
    const org = svc1.createOrg('restart-job');
    const api1 = svc1.api(org);
    await post(api1, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook('all') });
    const runner1 = new FakeRunner(svc1.server.bus);
    const app = await post(api1, '/v1/apps', { name: rid('app') });
    await post(api1, `/v1/apps/${app.app_id}/configs`, V1);
    const install = await post(api1, '/v1/installs', { app_id: app.app_id, name: rid('inst') });
    const prov = (await api1.get(`/v1/installs/${install.install_id}/workflows`)).body[0];
    expect((await waitWf(api1, prov.workflow_id)).status).toBe('succeeded');

    runner1.policy = (job) => (job.operation === 'sandbox.reprovision' ? 'hold' : [{ status: 'started' }, { status: 'succeeded' }]);
    const started = await post(api1, `/v1/installs/${install.install_id}/reprovision`);
    const job = await waitFor(() => runner1.held.find((j) => j.workflow_id === started.workflow_id), 5000, 'the sandbox job');
    expect(await runner1.send(job, [{ status: 'started' }])).toEqual([{ ok: true }]);
    await waitStep(api1, started.workflow_id, 'reprovision sandbox', 'started');
    await waitFor(
      () => rcv.subjects('all').includes(`${org.org_id}/workflow_step/${started.workflow_id}/${job.step_id}/started`),
      5000,
      'started delivery',
    );
    runner1.stop();
    await svc1.stop();
    services.splice(services.indexOf(svc1), 1);

    const svc2 = await startService({ db: svc1.db, localRunner: false });
    services.push(svc2);
    const api2 = svc2.api(org);
    const runner2 = new FakeRunner(svc2.server.bus);
    expect((await getWf(api2, started.workflow_id)).steps.map((s: Json) => s.status)).toEqual(['started', 'pending', 'pending']);
    // the runner reports the end of the job to the new process
    expect(await runner2.send(job, [{ status: 'started' }, { status: 'succeeded' }])).toEqual([{ ok: true }, { ok: true }]);
    const wf = await waitWf(api2, started.workflow_id);
    expect(wf.status).toBe('succeeded');
    expect(wf.steps.map((s: Json) => [s.name, s.status])).toEqual([
      ['reprovision sandbox', 'succeeded'],
      ['deploy api', 'succeeded'],
      ['deploy worker', 'succeeded'],
    ]);
    // the next jobs went out on the new process's bus
    expect(runner2.jobs.filter((j) => j.workflow_id === started.workflow_id).map((j) => j.operation)).toEqual([
      'component.deploy',
      'component.deploy',
    ]);
    const got = await expectDeliveredExactlyOnce(rcv, 'all', api2, org.org_id, { installs: [install.install_id] }, () => svc2.settled());
    const W = started.workflow_id;
    const mine = got.filter((s) => s.includes(`/${W}/`));
    expect(mine).toHaveLength(2 + 3 * 2);
    expect(mine).toContain(`${org.org_id}/workflow/${W}/succeeded`);
    runner2.stop();
  });

  it(
    `a job sent but never started: after a restart it is sent again with the same job_id once ${JOB_RESEND_MS} ms have passed on ` +
      `the engine's clock, and the workflow completes`,
    async () => {
      const clock = new ManualClock(Date.now()); // both processes' time
      const svc1 = await startService({ localRunner: false }, { clock });
      services.push(svc1);
      const org = svc1.createOrg('restart-resend');
      const api1 = svc1.api(org);
      await post(api1, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook('all') });
      const runner1 = new FakeRunner(svc1.server.bus);
      const app = await post(api1, '/v1/apps', { name: rid('app') });
      await post(api1, `/v1/apps/${app.app_id}/configs`, V1);
      const install = await post(api1, '/v1/installs', { app_id: app.app_id, name: rid('inst') });
      const prov = (await api1.get(`/v1/installs/${install.install_id}/workflows`)).body[0];
      expect((await waitWf(api1, prov.workflow_id)).status).toBe('succeeded');
      const worker = install.components.find((c: Json) => c.name === 'worker').component_id;

      runner1.policy = () => 'hold';
      const started = await post(api1, `/v1/installs/${install.install_id}/components/${worker}/deploy`);
      const job = await waitFor(() => runner1.held.find((j) => j.workflow_id === started.workflow_id), 5000, 'the deploy job');
      runner1.stop();
      await svc1.stop();
      services.splice(services.indexOf(svc1), 1);

      const svc2 = await startService({ db: svc1.db, localRunner: false }, { clock });
      services.push(svc2);
      const api2 = svc2.api(org);
      const runner2 = new FakeRunner(svc2.server.bus);
      expect((await getWf(api2, started.workflow_id)).steps.map((s: Json) => s.status)).toEqual(['pending']);
      // sent too recently to be sent again at start, or a second before the time is up
      await runner2.idle();
      expect(runner2.jobs).toEqual([]);
      clock.advance(JOB_RESEND_MS - 1000);
      await runner2.idle();
      expect(runner2.jobs).toEqual([]);
      clock.advance(2000); // the next sweep sends it again
      const again = await waitFor(() => runner2.jobs.find((j) => j.job_id === job.job_id), 5000, 'the job sent again');
      expect(again).toEqual(job);
      const wf = await waitWf(api2, started.workflow_id);
      expect(wf.status).toBe('succeeded');
      expect(runner2.jobs.filter((j) => j.workflow_id === started.workflow_id)).toHaveLength(1);
      await expectDeliveredExactlyOnce(rcv, 'all', api2, org.org_id, { installs: [install.install_id] }, () => svc2.settled());
      runner2.stop();
    },
  );
});

describe('a job the local runner had started when the process stopped', () => {
  it(
    'the next process with a local runner runs it again (same job_id) at start: the step starts once, succeeds, and the workflow ' +
      'completes',
    async () => {
      // the first process plays the local runner that reported `started` and then died with its process
      const svc1 = await startService({ localRunner: false });
      services.push(svc1);
      const org = svc1.createOrg('restart-local-job');
      const api1 = svc1.api(org);
      await post(api1, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook('all') });
      const runner1 = new FakeRunner(svc1.server.bus);
      const app = await post(api1, '/v1/apps', { name: rid('app') });
      await post(api1, `/v1/apps/${app.app_id}/configs`, V1);
      runner1.policy = (job) => (job.operation === 'sandbox.provision' ? 'hold' : [{ status: 'started' }, { status: 'succeeded' }]);
      const install = await post(api1, '/v1/installs', { app_id: app.app_id, name: rid('inst') });
      const prov = (await api1.get(`/v1/installs/${install.install_id}/workflows`)).body[0];
      const job = await waitFor(() => runner1.held.find((j) => j.workflow_id === prov.workflow_id), 5000, 'the sandbox job');
      expect(await runner1.send(job, [{ status: 'started' }])).toEqual([{ ok: true }]);
      await waitStep(api1, prov.workflow_id, 'provision sandbox', 'started');
      runner1.stop();
      await svc1.stop();
      services.splice(services.indexOf(svc1), 1);

      const svc2 = await startService({ db: svc1.db, localRunner: true });
      services.push(svc2);
      const api2 = svc2.api(org);
      const wf = await waitWf(api2, prov.workflow_id);
      expect(wf.status).toBe('succeeded');
      expect(wf.steps.every((s: Json) => s.status === 'succeeded')).toBe(true);
      const got = await expectDeliveredExactlyOnce(rcv, 'all', api2, org.org_id, { installs: [install.install_id] }, () => svc2.settled());
      const sandboxStep = `${org.org_id}/workflow_step/${prov.workflow_id}/${job.step_id}`;
      expect(got.filter((s) => s.startsWith(`${sandboxStep}/`)).sort()).toEqual([`${sandboxStep}/started`, `${sandboxStep}/succeeded`]);
    },
  );
});

// ---------------------------------------------------------------------------------------------

const spawnSvc = (db: string): Promise<ChildService> => spawnService(db);
