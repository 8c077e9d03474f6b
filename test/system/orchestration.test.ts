// Integration tests of workflow orchestration (CONTRACT 4.2, 5, 5.1, 5.2; spec 1, 3): a real svc in
// process (HTTP, SQLite, engine, memory bus, dispatch, delivery) and a recording receiver. The
// events a workflow produced are read from the server's bus (svc.events.>, in commit order) and,
// where the delivery matters, from the receiver. With `localRunner: false` this file plays the runner on the
// server's own bus.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { FakeRunner, type Answer, type Job } from '../helpers/fake-runner.ts';
import { getWf, post, successTrail, trail, waitStep, waitWf } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';

type Json = any;

// ---------------------------------------------------------------------------------------------
// helpers

const CONFIG = {
  sandbox: { size: 'small' },
  components: [
    { name: 'api', labels: { tier: 'web' }, values: { image: 'api:1' } },
    { name: 'worker', labels: { tier: 'bg' }, values: { image: 'worker:1' } },
    { name: 'db', labels: { tier: 'data' }, values: { image: 'pg:16' } },
  ],
  actions: [
    { name: 'migrate', labels: { kind: 'db' }, inputs: { target: { required: true }, dry_run: { required: false } } },
    { name: 'noop' },
  ],
  inputs: { region: 'eu' },
};

async function createApp(api: ApiClient, config: Json = CONFIG): Promise<{ app_id: string; cfg: Json }> {
  const app = await post(api, '/v1/apps', { name: rid('app') });
  const cfg = await post(api, `/v1/apps/${app.app_id}/configs`, config);
  return { app_id: app.app_id, cfg };
}

/** Create an install and wait for its provision workflow to end; returns the install and that workflow. */
async function provisioned(
  api: ApiClient,
  appId: string,
  labels: Record<string, string> = {},
): Promise<{ install: Json; provision: Json }> {
  const install = await post(api, '/v1/installs', { app_id: appId, name: rid('inst'), labels });
  const list = await api.get(`/v1/installs/${install.install_id}/workflows`);
  expect(list.status).toBe(200);
  expect(list.body.map((w: Json) => w.type)).toEqual(['provision']);
  const provision = await waitWf(api, list.body[0].workflow_id);
  return { install, provision };
}

const names = (wf: Json) => wf.steps.map((s: Json) => s.name);
const statuses = (wf: Json) => wf.steps.map((s: Json) => s.status);

// ---------------------------------------------------------------------------------------------

describe('with the local runner', () => {
  let svc: TestService;
  let rcv: Receiver;
  let org: OrgCreds;
  let api: ApiClient;

  beforeAll(async () => {
    svc = await startService();
    rcv = await startReceiver();
    org = svc.createOrg('orchestration');
    api = svc.api(org);
    await post(api, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook('all') });
  });
  afterAll(async () => {
    await svc?.stop();
    await rcv?.close();
  });

  it('runs every install workflow type with the steps of CONTRACT 4.2, in order, each started then succeeded', {
    timeout: 60_000,
  }, async () => {
    const { app_id } = await createApp(api);
    const { install: created, provision } = await provisioned(api, app_id, { env: 'prod' });
    const iid = created.install_id;
    const install = (await api.get(`/v1/installs/${iid}`)).body;
    const comp = Object.fromEntries(install.components.map((c: Json) => [c.name, c.component_id]));
    const action = Object.fromEntries(install.actions.map((a: Json) => [a.name, a.action_id]));
    expect(Object.keys(comp)).toEqual(['api', 'worker', 'db']);
    expect(install.sandbox_id).toBeTruthy();
    expect(install.runner_id).toBeTruthy();

    // provision: runner, sandbox, then each component in config order
    expect(provision).toMatchObject({ type: 'provision', owner_id: iid, owner_type: 'installs', parent: null, status: 'succeeded' });
    expect(names(provision)).toEqual(['provision runner', 'provision sandbox', 'deploy api', 'deploy worker', 'deploy db']);
    expect(statuses(provision)).toEqual(Array(5).fill('succeeded'));
    expect(provision.steps.map((s: Json) => s.idx)).toEqual([0, 1, 2, 3, 4]);
    expect(provision.steps.map((s: Json) => s.target_type)).toEqual([
      'runners',
      'install_sandbox_runs',
      'install_deploys',
      'install_deploys',
      'install_deploys',
    ]);
    expect(provision.steps[0].target_id).toBe(install.runner_id);
    expect(provision.steps[1].sandbox_id).toBe(install.sandbox_id);
    expect(provision.steps.slice(2).map((s: Json) => s.component_id)).toEqual([comp.api, comp.worker, comp.db]);
    expect(provision.steps[1].component_id).toBeNull();
    expect(provision.steps[2].sandbox_id).toBeNull();
    expect(install.provisioned).toBe(true);

    const run = async (path: string, body?: unknown): Promise<Json> => waitWf(api, (await post(api, path, body)).workflow_id);
    const cases: Array<{
      path: string;
      body?: unknown;
      type: string;
      steps: string[];
      targets: Array<string | null>;
      ids?: Array<string | null>;
    }> = [
      {
        path: `/v1/installs/${iid}/reprovision`,
        type: 'reprovision',
        steps: ['reprovision sandbox', 'deploy api', 'deploy worker', 'deploy db'],
        targets: ['install_sandbox_runs', 'install_deploys', 'install_deploys', 'install_deploys'],
        ids: [install.sandbox_id, comp.api, comp.worker, comp.db],
      },
      {
        path: `/v1/installs/${iid}/components/${comp.worker}/deploy`,
        type: 'manual_deploy',
        steps: ['deploy worker'],
        targets: ['install_deploys'],
        ids: [comp.worker],
      },
      {
        path: `/v1/installs/${iid}/components/${comp.db}/teardown`,
        type: 'teardown_component',
        steps: ['teardown db'],
        targets: ['install_deploys'],
        ids: [comp.db],
      },
      {
        path: `/v1/installs/${iid}/sandbox/reprovision`,
        type: 'reprovision_sandbox',
        steps: ['reprovision sandbox'],
        targets: ['install_sandbox_runs'],
        ids: [install.sandbox_id],
      },
      {
        path: `/v1/installs/${iid}/actions/${action.noop}/runs`,
        body: {},
        type: 'action_workflow_run',
        steps: ['run noop'],
        targets: ['install_action_workflow_runs'],
      },
      {
        path: `/v1/installs/${iid}/actions/${action.migrate}/runs`,
        body: { inputs: { target: 'v42' } },
        type: 'action_workflow_run',
        steps: ['run migrate'],
        targets: ['install_action_workflow_runs'],
      },
      {
        path: `/v1/installs/${iid}/drift-scans`,
        body: {},
        type: 'drift_run',
        steps: ['plan api', 'plan worker', 'plan db'],
        targets: ['install_deploys', 'install_deploys', 'install_deploys'],
        ids: [comp.api, comp.worker, comp.db],
      },
      {
        path: `/v1/installs/${iid}/drift-scans`,
        body: { sandbox: true },
        type: 'drift_run_reprovision_sandbox',
        steps: ['plan sandbox'],
        targets: ['install_sandbox_runs'],
        ids: [install.sandbox_id],
      },
      { path: `/v1/installs/${iid}/secrets/sync`, type: 'sync_secrets', steps: ['sync secrets'], targets: [null] },
    ];
    const seen: Json[] = [];
    for (const c of cases) {
      const wf = await run(c.path, c.body);
      seen.push(wf);
      expect(wf.type, c.path).toBe(c.type);
      expect(wf.status, `${c.type}: ${wf.error}`).toBe('succeeded');
      expect(wf).toMatchObject({ owner_id: iid, owner_type: 'installs', parent: null });
      expect(names(wf), c.type).toEqual(c.steps);
      expect(statuses(wf), c.type).toEqual(c.steps.map(() => 'succeeded'));
      expect(
        wf.steps.map((s: Json) => s.target_type),
        c.type,
      ).toEqual(c.targets);
      expect(wf.steps.map((s: Json) => s.execution_type)).toEqual(c.steps.map(() => 'system'));
      if (c.ids)
        expect(
          wf.steps.map((s: Json) => s.component_id ?? s.sandbox_id),
          c.type,
        ).toEqual(c.ids);
    }
    // an action run's workflow and step carry the action
    const migrate = seen[5];
    expect(migrate.action_id).toBe(action.migrate);

    // input_update is a PATCH
    const upd = await api.patch(`/v1/installs/${iid}/inputs`, { inputs: { region: 'us' } });
    expect(upd.status, upd.text).toBe(201);
    const inputs = await waitWf(api, upd.body.workflow_id);
    expect(inputs).toMatchObject({ type: 'input_update', status: 'succeeded' });
    expect(names(inputs)).toEqual(['update inputs']);
    expect(inputs.steps[0].target_type).toBeNull();
    expect((await api.get(`/v1/installs/${iid}`)).body.inputs).toEqual({ region: 'us' });

    // app_config_update: sandbox changed, db removed, worker changed, cache added, api unchanged
    const v2 = await post(api, `/v1/apps/${app_id}/configs`, {
      sandbox: { size: 'large' },
      components: [
        { name: 'api', labels: { tier: 'web' }, values: { image: 'api:1' } },
        { name: 'worker', labels: { tier: 'bg' }, values: { image: 'worker:2' } },
        { name: 'cache', values: { image: 'redis:7' } },
      ],
    });
    const applied = await post(api, `/v1/installs/${iid}/app-config-updates`, { app_config_id: v2.app_config_id });
    const acu = await waitWf(api, applied.workflow_id);
    expect(acu).toMatchObject({ type: 'app_config_update', status: 'succeeded', parent: null });
    expect(names(acu)).toEqual(['reprovision sandbox', 'teardown db', 'deploy worker', 'deploy cache']);
    expect(statuses(acu)).toEqual(Array(4).fill('succeeded'));
    expect(acu.steps[1].component_id).toBe(comp.db);
    expect(acu.steps[2].component_id).toBe(comp.worker); // ids stable per install and name

    // deprovision: components in reverse order, then the sandbox
    const deprov = await run(`/v1/installs/${iid}/deprovision`);
    expect(deprov).toMatchObject({ type: 'deprovision', status: 'succeeded' });
    expect(names(deprov)).toEqual(['teardown cache', 'teardown worker', 'teardown api', 'deprovision sandbox']);
    expect(deprov.steps.map((s: Json) => s.target_type)).toEqual([
      'install_deploys',
      'install_deploys',
      'install_deploys',
      'install_sandbox_runs',
    ]);
    expect((await api.get(`/v1/installs/${iid}`)).body.provisioned).toBe(false);

    const dsb = await run(`/v1/installs/${iid}/sandbox/deprovision`);
    expect(dsb).toMatchObject({ type: 'deprovision_sandbox', status: 'succeeded' });
    expect(names(dsb)).toEqual(['deprovision sandbox']);

    // events (commit order): workflow started; per step started then succeeded; workflow succeeded
    const events = await svc.events(org.org_id);
    for (const wf of [provision, ...seen.filter((w) => !w.type.startsWith('drift_run')), inputs, acu, deprov, dsb]) {
      expect(trail(events, wf.workflow_id), wf.type).toEqual(successTrail(names(wf)));
    }
    // drift workflows' lifecycle is never an event (CONTRACT 6.1); the local runner's plans are clean
    for (const wf of seen.filter((w) => w.type.startsWith('drift_run'))) expect(trail(events, wf.workflow_id), wf.type).toEqual([]);

    // step events carry what spec 6.5 says
    const deploy = events.find(
      (e) =>
        e.data.kind === 'workflow_step' &&
        e.data.workflow.id === provision.workflow_id &&
        e.data.step.name === 'deploy worker' &&
        e.data.transition === 'succeeded',
    );
    expect(deploy.data.step).toMatchObject({
      idx: 3,
      target_type: 'install_deploys',
      component_id: comp.worker,
      sandbox_id: null,
      execution_type: 'system',
    });
    expect(deploy.data.outcome.status).toBe('succeeded');
    const sbx = events.find(
      (e) =>
        e.data.kind === 'workflow_step' &&
        e.data.workflow.id === provision.workflow_id &&
        e.data.step.name === 'provision sandbox' &&
        e.data.transition === 'started',
    );
    expect(sbx.data.step).toMatchObject({
      idx: 1,
      target_type: 'install_sandbox_runs',
      sandbox_id: install.sandbox_id,
      component_id: null,
    });
    expect(sbx.data.outcome).toBeUndefined();
    const act = events.find((e) => e.data.kind === 'workflow_step' && e.data.workflow.id === migrate.workflow_id);
    expect(act.data.action).toEqual({ id: action.migrate, name: 'migrate' });

    // the receiver sees exactly the committed events, each once (after settled() nothing more arrives)
    const committed = events.map((e) => e.subject).sort();
    await svc.settled();
    expect((await svc.events(org.org_id)).map((e) => e.subject).sort()).toEqual(committed);
    expect(
      rcv
        .subjects('all')
        .filter((s) => s.startsWith(org.org_id))
        .sort(),
    ).toEqual(committed);
  });

  it('a run missing a required input: its step emits started, then failed with outcome.error naming the input', async () => {
    const { app_id } = await createApp(api);
    const { install } = await provisioned(api, app_id);
    const migrate = install.actions.find((a: Json) => a.name === 'migrate').action_id;
    const before = svc.server.ctx.db.prepare('SELECT COUNT(*) AS n FROM jobs WHERE org_id = ?').get(org.org_id) as { n: number };

    const started = await post(api, `/v1/installs/${install.install_id}/actions/${migrate}/runs`, { inputs: { dry_run: true } });
    const wf = await waitWf(api, started.workflow_id);
    expect(wf.status).toBe('failed');
    expect(wf.steps).toHaveLength(1);
    expect(wf.steps[0]).toMatchObject({ name: 'run migrate', status: 'failed', target_type: 'install_action_workflow_runs' });
    expect(wf.steps[0].error).toMatch(/\btarget\b/);
    expect(wf.steps[0].error).not.toMatch(/dry_run/);
    expect(wf.error).toMatch(/\btarget\b/);

    const events = await svc.events(org.org_id);
    expect(trail(events, wf.workflow_id)).toEqual([
      'workflow::started',
      'workflow_step:run migrate:started',
      'workflow_step:run migrate:failed',
      'workflow::failed',
    ]);
    const failed = events.filter((e) => e.data.workflow?.id === wf.workflow_id && e.data.transition === 'failed');
    for (const e of failed) {
      expect(e.data.outcome.status).toBe('failed');
      expect(e.data.outcome.error).toMatch(/\btarget\b/);
      expect(e.interests).toEqual(expect.arrayContaining(['event:lifecycle.failed', 'outcome:completion', 'outcome:failures']));
    }
    expect(failed[0].data.action).toEqual({ id: migrate, name: 'migrate' });
    // no job went to the runner for it
    const after = svc.server.ctx.db
      .prepare('SELECT COUNT(*) AS n FROM jobs WHERE org_id = ? AND workflow_id = ?')
      .get(org.org_id, wf.workflow_id) as { n: number };
    expect(after.n).toBe(0);
    expect(before.n).toBeGreaterThan(0);

    // an explicit null is missing too; a given value is enough
    const nul = await waitWf(
      api,
      (await post(api, `/v1/installs/${install.install_id}/actions/${migrate}/runs`, { inputs: { target: null } })).workflow_id,
    );
    expect(nul.status).toBe('failed');
    const ok = await waitWf(
      api,
      (await post(api, `/v1/installs/${install.install_id}/actions/${migrate}/runs`, { inputs: { target: 'x' } })).workflow_id,
    );
    expect(ok.status).toBe('succeeded');
  });

  it(
    'cancelling a branch run that waits for an approval: the waiting step and the pending ones end cancelled; ' + 'only started steps emit',
    async () => {
      const { app_id, cfg } = await createApp(api);
      const { install } = await provisioned(api, app_id, { ring: 'one' });
      const branch = await post(api, `/v1/apps/${app_id}/branches`, {
        name: rid('br'),
        install_groups: [
          { name: 'one', install_ids: [install.install_id] },
          { name: 'two', selector: { match_labels: { ring: 'one' } } },
        ],
      });
      const run = await post(api, `/v1/apps/${app_id}/branches/${branch.app_branch_id}/runs`, { app_config_id: cfg.app_config_id });
      const { wf: waiting, step: plan } = await waitStep(api, run.workflow_id, 'plan install group: one', 'awaiting_approval');
      expect(waiting.status).toBe('started');
      expect(statuses(waiting)).toEqual(['succeeded', 'awaiting_approval', 'pending', 'pending', 'pending']);

      const cancelled = await post(api, `/v1/workflows/${run.workflow_id}/cancel`, undefined, 200);
      expect(cancelled.status).toBe('cancelled');
      expect(statuses(cancelled)).toEqual(['succeeded', 'cancelled', 'cancelled', 'cancelled', 'cancelled']);

      const events = await svc.events(org.org_id);
      expect(trail(events, run.workflow_id)).toEqual([
        'workflow::started',
        'workflow_step:build components:started',
        'workflow_step:build components:succeeded',
        'workflow_step:plan install group: one:started',
        'workflow_step_approval:plan install group: one:requested',
        'workflow_step:plan install group: one:cancelled',
        'workflow::cancelled',
      ]);
      const stepCancel = events.find((e) => e.subject === `${org.org_id}/workflow_step/${run.workflow_id}/${plan.step_id}/cancelled`);
      expect(stepCancel.data.outcome).toMatchObject({ status: 'cancelled' });
      expect(stepCancel.data.outcome.error).toBeUndefined();
      expect(stepCancel.interests).toEqual(expect.arrayContaining(['outcome:completion', 'outcome:failures']));

      // nothing more: an approval now is a conflict, a second cancel too, and no child workflow started
      const late = await api.post(`/v1/workflows/${run.workflow_id}/steps/${plan.step_id}/approval`, { response: 'approved' });
      expect(late.status).toBe(409);
      expect((await api.post(`/v1/workflows/${run.workflow_id}/cancel`)).status).toBe(409);
      expect((await api.get(`/v1/installs/${install.install_id}/workflows`)).body.map((w: Json) => w.type)).toEqual(['provision']);
      expect(await svc.events(org.org_id)).toHaveLength(events.length);
    },
  );
});

// ---------------------------------------------------------------------------------------------

describe('with an external runner (localRunner: false)', () => {
  let svc: TestService;
  let rcv: Receiver;
  let org: OrgCreds;
  let api: ApiClient;
  let runner: FakeRunner;

  beforeAll(async () => {
    svc = await startService({ localRunner: false });
    rcv = await startReceiver();
    org = svc.createOrg('external-runner');
    api = svc.api(org);
    runner = new FakeRunner(svc.server.bus);
    await post(api, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook('all') });
    await post(api, '/v1/orgs/current/webhooks', {
      webhook_url: rcv.hook('drift'),
      interests: {
        resources: { components: { outcome: 'none', drift_detected: true }, sandboxes: { outcome: 'none', drift_detected: true } },
      },
    });
  });
  afterAll(async () => {
    runner?.stop();
    await svc?.stop();
    await rcv?.close();
  });

  const autoAnswer = (job: Job): Answer => [
    { status: 'started' },
    { status: 'succeeded', ...(job.operation.endsWith('.plan') ? { plan: { changes: [] } } : {}) },
  ];

  it('jobs carry what the runner needs, and a step starts only when the runner says started', async () => {
    runner.policy = autoAnswer;
    const { app_id } = await createApp(api);
    const { install: created, provision } = await provisioned(api, app_id);
    const install = (await api.get(`/v1/installs/${created.install_id}`)).body;
    expect(provision.status).toBe('succeeded');
    const jobs = runner.jobs.filter((j) => j.workflow_id === provision.workflow_id);
    expect(jobs.map((j) => j.operation)).toEqual([
      'runner.provision',
      'sandbox.provision',
      'component.deploy',
      'component.deploy',
      'component.deploy',
    ]);
    expect(jobs[0].runner_id).not.toBe(install.runner_id); // the org's runner
    expect(jobs.slice(1).every((j) => j.runner_id === install.runner_id)).toBe(true);
    expect(jobs[1].sandbox_id).toBe(install.sandbox_id);
    expect(jobs.slice(2).map((j) => j.component_id)).toEqual(install.components.map((c: Json) => c.component_id));
    expect(jobs.every((j) => j.install_id === install.install_id && j.plan_only === false)).toBe(true);
    expect(jobs.every((j) => j.app_config_id === install.app_config_id)).toBe(true);

    // a job held unanswered: its step stays pending (sent, not started) and emits nothing
    runner.policy = () => 'hold';
    const wf = await post(api, `/v1/installs/${install.install_id}/sandbox/reprovision`);
    const job = await waitFor(() => runner.held.find((j) => j.workflow_id === wf.workflow_id), 5000, 'the job');
    await runner.idle(); // nothing moves until the runner answers
    expect(statuses(await getWf(api, wf.workflow_id))).toEqual(['pending']);
    expect(trail(await svc.events(org.org_id), wf.workflow_id)).toEqual(['workflow::started']);
    // a terminal status with no started before it counts as both
    expect(await runner.send(job, [{ status: 'succeeded' }])).toEqual([{ ok: true }]);
    const done = await waitWf(api, wf.workflow_id);
    expect(done.status).toBe('succeeded');
    expect(trail(await svc.events(org.org_id), wf.workflow_id)).toEqual(successTrail(['reprovision sandbox']));
    // a repeat changes nothing
    await runner.send(job, [{ status: 'succeeded' }, { status: 'started' }]);
    expect(trail(await svc.events(org.org_id), wf.workflow_id)).toEqual(successTrail(['reprovision sandbox']));
  });

  it(
    'cancelling a workflow that waits on a job: the running step ends cancelled (with an event), pending ones silently; a late ' +
      'answer is ignored',
    async () => {
      runner.policy = autoAnswer;
      const { app_id } = await createApp(api);
      const { install } = await provisioned(api, app_id);
      runner.policy = (job) => (job.operation === 'component.deploy' ? 'hold' : autoAnswer(job));
      const started = await post(api, `/v1/installs/${install.install_id}/reprovision`);
      const job = await waitFor(() => runner.held.find((j) => j.workflow_id === started.workflow_id), 5000, 'the deploy job');
      expect(await runner.send(job, [{ status: 'started' }])).toEqual([{ ok: true }]);
      await waitStep(api, started.workflow_id, 'deploy api', 'started');

      const cancelled = await post(api, `/v1/workflows/${started.workflow_id}/cancel`, undefined, 200);
      expect(cancelled.status).toBe('cancelled');
      expect(statuses(cancelled)).toEqual(['succeeded', 'cancelled', 'cancelled', 'cancelled']);
      const trailAfterCancel = [
        'workflow::started',
        'workflow_step:reprovision sandbox:started',
        'workflow_step:reprovision sandbox:succeeded',
        'workflow_step:deploy api:started',
        'workflow_step:deploy api:cancelled',
        'workflow::cancelled',
      ];
      expect(trail(await svc.events(org.org_id), started.workflow_id)).toEqual(trailAfterCancel);
      const jobRow = svc.server.ctx.db.prepare('SELECT status FROM jobs WHERE job_id = ?').get(job.job_id) as { status: string };
      expect(jobRow.status).toBe('cancelled');

      // the runner finishes anyway: answered, but nothing changes and nothing is emitted
      const replies = await runner.send(job, [{ status: 'succeeded' }]);
      expect(replies[0].ok).toBe(true);
      expect(statuses(await getWf(api, started.workflow_id))).toEqual(['succeeded', 'cancelled', 'cancelled', 'cancelled']);
      expect(trail(await svc.events(org.org_id), started.workflow_id)).toEqual(trailAfterCancel);
      // and no further job was sent for it
      expect(runner.jobs.filter((j) => j.workflow_id === started.workflow_id)).toHaveLength(2);

      // the deliveries match: the step's cancelled event reached the receiver once, the pending steps' nothing
      const wfCancelled = `${org.org_id}/workflow/${started.workflow_id}/cancelled`;
      await waitFor(() => rcv.subjects('all').includes(wfCancelled), 5000, 'the cancelled delivery');
      await svc.settled();
      const [sandboxStep, apiStep] = cancelled.steps;
      const base = `${org.org_id}/workflow_step/${started.workflow_id}`;
      expect(
        rcv
          .subjects('all')
          .filter((s) => s.startsWith(base))
          .sort(),
      ).toEqual(
        [
          `${base}/${sandboxStep.step_id}/started`,
          `${base}/${sandboxStep.step_id}/succeeded`,
          `${base}/${apiStep.step_id}/started`,
          `${base}/${apiStep.step_id}/cancelled`,
        ].sort(),
      );
    },
  );

  it('a plan with a change that is not a no-op: exactly one drift event, for that component', async () => {
    runner.policy = autoAnswer;
    const { app_id } = await createApp(api);
    const { install } = await provisioned(api, app_id);
    const worker = install.components.find((c: Json) => c.name === 'worker').component_id;
    const changes = [
      { address: 'kubernetes_deployment.worker', action: 'update' },
      { address: 'kubernetes_service.worker', action: 'no-op' },
    ];
    runner.policy = (job) => {
      if (job.operation === 'component.plan' && job.component_id === worker)
        return [{ status: 'started' }, { status: 'succeeded', plan: { changes } }];
      if (job.operation === 'component.plan')
        return [{ status: 'started' }, { status: 'succeeded', plan: { changes: [{ address: `x.${job.component_id}`, action: 'no-op' }] } }];
      return autoAnswer(job);
    };
    const before = rcv.at('drift').length;
    const wf = await waitWf(api, (await post(api, `/v1/installs/${install.install_id}/drift-scans`, {})).workflow_id);
    expect(wf.status).toBe('succeeded');
    const planJobs = runner.jobs.filter((j) => j.workflow_id === wf.workflow_id);
    expect(planJobs.map((j) => j.operation)).toEqual(['component.plan', 'component.plan', 'component.plan']);
    expect(planJobs.every((j) => j.plan_only === true)).toBe(true);
    expect(wf.steps.find((s: Json) => s.name === 'plan worker').plan).toEqual({ changes });

    const drift = (await svc.events(org.org_id)).filter(
      (e) => e.type === 'com.svc.drift.detected.v1' && e.data.workflow.id === wf.workflow_id,
    );
    expect(drift).toHaveLength(1);
    const stepId = wf.steps.find((s: Json) => s.name === 'plan worker').step_id;
    expect(drift[0].subject).toBe(`${org.org_id}/drift_detected/${wf.workflow_id}/${stepId}/detected`);
    expect(drift[0].data).toMatchObject({
      kind: 'drift_detected',
      transition: 'detected',
      install_id: install.install_id,
      workflow: { id: wf.workflow_id, type: 'drift_run' },
      step: { name: 'plan worker', component_id: worker },
      drift: { component_id: worker, changes: [{ address: 'kubernetes_deployment.worker', action: 'update' }] },
    });
    expect(drift[0].interests).toEqual(expect.arrayContaining(['resource:components', 'op:components.drift', 'event:drift.detected']));

    // the drift-only webhook gets it once, and nothing else of this scan
    await waitFor(() => rcv.at('drift').length > before, 5000, 'the drift delivery');
    await svc.settled();
    const got = rcv.at('drift').slice(before);
    expect(got.map((r) => r.json.subject)).toEqual([drift[0].subject]);

    // a sandbox plan with a real change: one drift event for the sandbox
    runner.policy = (job) =>
      job.operation === 'sandbox.plan'
        ? [{ status: 'succeeded', plan: { changes: [{ address: 'aws_vpc.main', action: 'replace' }] } }]
        : autoAnswer(job);
    const sb = await waitWf(api, (await post(api, `/v1/installs/${install.install_id}/drift-scans`, { sandbox: true })).workflow_id);
    expect(sb.status).toBe('succeeded');
    const sbDrift = (await svc.events(org.org_id)).filter(
      (e) => e.type === 'com.svc.drift.detected.v1' && e.data.workflow.id === sb.workflow_id,
    );
    expect(sbDrift).toHaveLength(1);
    expect(sbDrift[0].data.drift).toEqual({ sandbox_id: install.sandbox_id, changes: [{ address: 'aws_vpc.main', action: 'replace' }] });
    expect(sbDrift[0].interests).toEqual(expect.arrayContaining(['resource:sandboxes', 'op:sandboxes.drift']));

    // a plan of only no-ops, or a plan in a workflow that is not a drift scan: no drift event
    runner.policy = (job) =>
      job.operation === 'component.plan'
        ? [{ status: 'succeeded', plan: { changes: [{ address: 'a', action: 'no-op' }] } }]
        : autoAnswer(job);
    const clean = await waitWf(api, (await post(api, `/v1/installs/${install.install_id}/drift-scans`, {})).workflow_id);
    expect(clean.status).toBe('succeeded');
    runner.policy = (job) =>
      job.operation === 'component.deploy'
        ? [{ status: 'succeeded', plan: { changes: [{ address: 'a', action: 'create' }] } }]
        : autoAnswer(job);
    const dep = await waitWf(api, (await post(api, `/v1/installs/${install.install_id}/components/${worker}/deploy`)).workflow_id);
    expect(dep.status).toBe('succeeded');
    const all = (await svc.events(org.org_id)).filter((e) => e.type === 'com.svc.drift.detected.v1');
    expect(all.map((e) => e.data.workflow.id).sort()).toEqual([wf.workflow_id, sb.workflow_id].sort());
  });
});

// ---------------------------------------------------------------------------------------------

describe("scheduled drift scans (the engine's clock advanced by the test)", () => {
  let svc: TestService;
  afterAll(async () => {
    await svc?.stop();
  });

  it(
    'start a drift_run and a drift_run_reprovision_sandbox for every provisioned install, and none for the others; the local ' +
      'runner runs them',
    async () => {
      const DRIFT_EVERY_MS = 3_600_000;
      const clock = new ManualClock(Date.now());
      svc = await startService({ driftIntervalMs: DRIFT_EVERY_MS }, { clock });
      const org = svc.createOrg('drift-schedule');
      const api = svc.api(org);
      const { app_id } = await createApp(api);
      const { install: a } = await provisioned(api, app_id);
      const { install: b } = await provisioned(api, app_id);
      const deprov = await waitWf(api, (await post(api, `/v1/installs/${b.install_id}/deprovision`)).workflow_id);
      expect(deprov.status).toBe('succeeded');

      const scans = async (iid: string) =>
        (await api.get(`/v1/installs/${iid}/workflows`)).body.filter((w: Json) => w.type.startsWith('drift_run'));
      clock.advance(DRIFT_EVERY_MS - 1);
      expect(await scans(a.install_id)).toEqual([]);
      clock.advance(1); // the scans start in this call, before it returns
      const found = await scans(a.install_id);
      expect(found.map((w: Json) => w.type).sort()).toEqual(['drift_run', 'drift_run_reprovision_sandbox']);
      expect(await scans(b.install_id)).toEqual([]); // deprovisioned: not scanned
      const run = found.find((w: Json) => w.type === 'drift_run');
      const sandbox = found.find((w: Json) => w.type === 'drift_run_reprovision_sandbox');
      expect(run).toMatchObject({ owner_id: a.install_id, owner_type: 'installs', parent: null });
      const runWf = await waitWf(api, run.workflow_id);
      expect(runWf.status).toBe('succeeded');
      expect(names(runWf)).toEqual(['plan api', 'plan worker', 'plan db']);
      const sbWf = await waitWf(api, sandbox.workflow_id);
      expect(sbWf.status).toBe('succeeded');
      expect(names(sbWf)).toEqual(['plan sandbox']);
      // they keep coming, in pairs
      clock.advance(DRIFT_EVERY_MS);
      expect(await scans(a.install_id)).toHaveLength(4);
      expect(await scans(b.install_id)).toEqual([]);
      for (const w of await scans(a.install_id)) expect((await waitWf(api, w.workflow_id)).status).toBe('succeeded');
      // and, the local runner's plans being clean, no drift event
      expect((await svc.events(org.org_id)).filter((e) => e.type === 'com.svc.drift.detected.v1')).toEqual([]);
    },
  );
});
