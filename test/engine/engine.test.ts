// The engine (src/engine/engine.ts) on its own, on a ManualClock: no HTTP, no delivery (the setup:
// test/helpers/engine.ts). This file plays the runner through engine.ingest, as src/ingest would,
// and reads the outbox back as the CloudEvents each commit wrote. Time moves only when a test
// advances the clock: the runner health check, the re-sending of jobs not started and the
// scheduled drift scans run on it (src/engine/scheduler.ts).
import { afterEach, describe, expect, it } from 'vitest';
import { ConflictError, InvalidError, NotFoundError } from '../../src/domain/errors.ts';
import { newId } from '../../src/domain/ids.ts';
import type { HealthMessage, RunnerMessage, WorkflowMessage } from '../../src/domain/producer-messages.ts';
import { JOB_RESEND_MS, type ProducerFact } from '../../src/engine/engine.ts';
import { getInstall, listComponents, type Install } from '../../store/installs.ts';
import { getRunner } from '../../store/runners.ts';
import { getJob, getWorkflow, listOwnerWorkflows, listSteps, listVersions } from '../../store/workflows.ts';
import { CONFIG_V2, DASHBOARD, EngineWorld, HEALTH_EVERY_MS, SOURCE } from '../helpers/engine.ts';
import { successTrail, trail } from '../helpers/workflows.ts';

const DRIFT_EVERY_MS = 3_600_000;

const worlds: EngineWorld[] = [];
function world(): EngineWorld {
  const w = new EngineWorld();
  worlds.push(w);
  return w;
}
afterEach(() => {
  for (const w of worlds.splice(0)) w.close();
});

const provisionOf = (w: EngineWorld, install: Install) =>
  listOwnerWorkflows(w.db, install.org_id, install.install_id).find((x) => x.type === 'provision')!;
const statuses = (w: EngineWorld, workflowId: string) => listSteps(w.db, workflowId).map((s) => s.status);

// ---------------------------------------------------------------------------------------------

describe('a provision workflow through job reports', () => {
  it(
    'each step starts on `started` and ends on `succeeded`, one job at a time; events commit with the state, timed by the ' + 'clock',
    async () => {
      const w = world();
      const O = w.org();
      const cfg = w.config(O);
      const install = w.install(O, cfg, { env: 'prod' });
      const wf = provisionOf(w, install);
      const steps = ['provision runner', 'provision sandbox', 'deploy api', 'deploy worker'];
      expect(listSteps(w.db, wf.workflow_id).map((s) => s.name)).toEqual(steps);
      expect(wf.status).toBe('started');
      expect(trail(w.events(), wf.workflow_id)).toEqual(['workflow::started']);

      // one job at a time: the first step's, for the org's runner
      const [first] = await w.jobs();
      expect(await w.jobs()).toHaveLength(1);
      expect(first).toMatchObject({
        org_id: O,
        workflow_id: wf.workflow_id,
        operation: 'runner.provision',
        install_id: install.install_id,
        app_config_id: cfg.app_config_id,
        plan_only: false,
      });
      expect(first.runner_id).not.toBe(install.runner_id);
      expect(getJob(w.db, O, first.job_id)!.status).toBe('sent');
      expect(statuses(w, wf.workflow_id)).toEqual(['pending', 'pending', 'pending', 'pending']); // sent is not started

      // started: the step starts (once: a repeat is a duplicate)
      w.clock.advance(1000);
      expect(w.report(first, { status: 'started' })).toBe('accepted');
      expect(w.report(first, { status: 'started' })).toBe('duplicate');
      expect(statuses(w, wf.workflow_id)[0]).toBe('started');
      w.clock.advance(1500);
      expect(w.report(first, { status: 'succeeded' })).toBe('accepted');
      expect(w.report(first, { status: 'succeeded' })).toBe('duplicate');
      expect(w.report(first, { status: 'failed', error: 'late' })).toBe('ignored');
      const runnerStep = w.events().filter((e) => e.data.step?.name === 'provision runner');
      expect(runnerStep.map((e) => [e.data.transition, e.time])).toEqual([
        ['started', new Date(w.clock.now() - 1500).toISOString()],
        ['succeeded', new Date(w.clock.now()).toISOString()],
      ]);
      expect(runnerStep[1].data.outcome).toEqual({ status: 'succeeded', duration_ms: 1500 });

      // the rest, one after the other
      const rest = await w.runJobs();
      expect(rest.map((j) => j.operation)).toEqual(['sandbox.provision', 'component.deploy', 'component.deploy']);
      expect(rest.every((j) => j.runner_id === install.runner_id)).toBe(true);
      expect(rest.slice(1).map((j) => j.component_id)).toEqual(listComponents(w.db, install.install_id).map((c) => c.component_id));
      expect(getWorkflow(w.db, wf.workflow_id)!.status).toBe('succeeded');
      expect(trail(w.events(), wf.workflow_id)).toEqual(successTrail(steps));
      expect(getInstall(w.db, O, install.install_id)!.provisioned).toBe(true);
      expect(listVersions(w.db, install.install_id).map((v) => [v.version, v.status])).toEqual([[1, 'succeeded']]);

      // every event is routed and counted; every commit that wrote events told the relay
      const events = w.events();
      expect(events.every((e) => e.source === SOURCE && e.svcorgid === O)).toBe(true);
      expect(events.find((e) => e.data.kind === 'workflow').data.links.install).toBe(`${DASHBOARD}/${O}/installs/${install.install_id}`);
      expect(w.outboxKicks).toBeGreaterThan(0);
      const counted = (await w.metrics.eventsEmitted.get()).values.reduce((n, v) => n + v.value, 0);
      expect(counted).toBe(events.length);
    },
  );

  it(
    "a failed job fails its step and the workflow with the runner's error; later steps end cancelled without events; a " +
      'late answer changes nothing',
    async () => {
      const w = world();
      const O = w.org();
      const install = w.install(O, w.config(O));
      const wf = provisionOf(w, install);
      await w.runJobs((j) =>
        j.operation === 'sandbox.provision'
          ? [{ status: 'started' }, { status: 'failed', error: 'quota exceeded' }]
          : [{ status: 'started' }, { status: 'succeeded' }],
      );
      const done = getWorkflow(w.db, wf.workflow_id)!;
      expect(done).toMatchObject({ status: 'failed', error: 'quota exceeded' });
      expect(statuses(w, wf.workflow_id)).toEqual(['succeeded', 'failed', 'cancelled', 'cancelled']);
      const expected = [
        'workflow::started',
        'workflow_step:provision runner:started',
        'workflow_step:provision runner:succeeded',
        'workflow_step:provision sandbox:started',
        'workflow_step:provision sandbox:failed',
        'workflow::failed',
      ];
      expect(trail(w.events(), wf.workflow_id)).toEqual(expected);
      const failed = w.events().find((e) => e.data.kind === 'workflow' && e.data.transition === 'failed');
      expect(failed.data.outcome).toMatchObject({ status: 'failed', error: 'quota exceeded' });
      expect(getInstall(w.db, O, install.install_id)!.provisioned).toBe(false);
      // the cancelled steps' jobs were never sent; a repeat of the failed job is a duplicate, another answer ignored
      const jobs = await w.jobs();
      expect(jobs.map((j) => j.operation)).toEqual(['runner.provision', 'sandbox.provision']);
      expect(w.report(jobs[1], { status: 'failed', error: 'quota exceeded' })).toBe('duplicate');
      expect(w.report(jobs[1], { status: 'succeeded' })).toBe('ignored');
      expect(trail(w.events(), wf.workflow_id)).toEqual(expected);
    },
  );

  it('a report for a job the engine does not know is refused: {ok: false}, nothing written', () => {
    const w = world();
    const O = w.org();
    const before = w.events().length;
    const [r] = w.engine.ingest([{ family: 'jobs', orgId: O, id: 'job_unknown', body: { status: 'started' } }]);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toBeInstanceOf(NotFoundError);
    expect(w.events()).toHaveLength(before);
  });
});

describe('approvals and cancel', () => {
  /** Two installs on v1 and a branch run to v2 over groups [a], [b], waiting at the first plan. */
  async function branchRun(w: EngineWorld) {
    const O = w.org();
    const v1 = w.config(O);
    const v2 = w.config(O, CONFIG_V2, v1.app_id);
    const a = w.install(O, v1);
    const b = w.install(O, v1);
    await w.runJobs();
    const run = w.engine.startBranchRun(
      O,
      v1.app_id,
      newId('abr'),
      v2,
      [
        { name: 'a', install_ids: [a.install_id] },
        { name: 'b', install_ids: [b.install_id] },
      ],
      true,
    );
    return { O, v1, v2, a, b, run };
  }

  it(
    "a branch run waits at each group's plan; approving starts that group's app_config_update; the run ends when every " +
      'group is applied',
    async () => {
      const w = world();
      const { O, v2, a, b, run } = await branchRun(w);
      const W = run.workflow_id;
      const names = listSteps(w.db, W).map((s) => s.name);
      expect(names).toEqual([
        'build components',
        'plan install group: a',
        'deploy install group: a',
        'plan install group: b',
        'deploy install group: b',
      ]);
      expect(statuses(w, W)).toEqual(['skipped', 'awaiting_approval', 'pending', 'pending', 'pending']);
      const planA = listSteps(w.db, W)[1];
      expect(planA.plan).toMatchObject({
        install_group: 'a',
        installs: [{ install_id: a.install_id, new_app_config_id: v2.app_config_id, diff: { changed: true } }],
      });
      expect(trail(w.events(), W)).toEqual([
        'workflow::started',
        'workflow_step:plan install group: a:started',
        'workflow_step_approval:plan install group: a:requested',
      ]);
      expect(await w.runJobs()).toEqual([]); // nothing to run while it waits

      const approved = w.engine.respondToApproval(O, W, planA.step_id, 'approved', 'looks fine');
      expect(approved.status).toBe('succeeded');
      expect(approved.approval).toMatchObject({ status: 'approved', note: 'looks fine' });
      expect(() => w.engine.respondToApproval(O, W, planA.step_id, 'approved')).toThrow(ConflictError);
      const [childA] = listOwnerWorkflows(w.db, O, a.install_id).filter((x) => x.type === 'app_config_update');
      expect(childA.parent).toEqual({ workflow_id: W, step_id: listSteps(w.db, W)[2].step_id, kind: 'workflow_step' });
      expect(statuses(w, W)).toEqual(['skipped', 'succeeded', 'started', 'pending', 'pending']);
      expect((await w.runJobs()).map((j) => [j.install_id, j.operation])).toEqual([[a.install_id, 'component.deploy']]);
      expect(getWorkflow(w.db, childA.workflow_id)!.status).toBe('succeeded');
      expect(statuses(w, W)).toEqual(['skipped', 'succeeded', 'succeeded', 'awaiting_approval', 'pending']);

      const planB = listSteps(w.db, W)[3];
      w.engine.respondToApproval(O, W, planB.step_id, 'approved');
      await w.runJobs();
      expect(getWorkflow(w.db, W)!.status).toBe('succeeded');
      for (const i of [a, b]) {
        expect(getInstall(w.db, O, i.install_id)!.app_config_id).toBe(v2.app_config_id);
        expect(listVersions(w.db, i.install_id).map((v) => [v.version, v.app_config_id, v.status])).toEqual([
          [2, v2.app_config_id, 'succeeded'],
          [1, a.app_config_id, 'succeeded'],
        ]);
      }
      // the skipped build step never emitted; each approval was requested and answered once
      const t = trail(w.events(), W);
      expect(t.filter((x) => x.includes('build components'))).toEqual([]);
      expect(t.filter((x) => x.startsWith('workflow_step_approval'))).toEqual([
        'workflow_step_approval:plan install group: a:requested',
        'workflow_step_approval:plan install group: a:approved',
        'workflow_step_approval:plan install group: b:requested',
        'workflow_step_approval:plan install group: b:approved',
      ]);
      expect(t.at(-1)).toBe('workflow::succeeded');
    },
  );

  it('rejecting fails the step and the run; later steps end cancelled without events; nothing is applied', async () => {
    const w = world();
    const { O, v1, a, b, run } = await branchRun(w);
    const W = run.workflow_id;
    const planA = listSteps(w.db, W)[1];
    const rejected = w.engine.respondToApproval(O, W, planA.step_id, 'rejected', 'not now');
    expect(rejected).toMatchObject({ status: 'failed', error: 'approval rejected: not now' });
    expect(getWorkflow(w.db, W)!.status).toBe('failed');
    expect(statuses(w, W)).toEqual(['skipped', 'failed', 'cancelled', 'cancelled', 'cancelled']);
    expect(trail(w.events(), W).slice(-3)).toEqual([
      'workflow_step_approval:plan install group: a:rejected',
      'workflow_step:plan install group: a:failed',
      'workflow::failed',
    ]);
    for (const i of [a, b]) expect(getInstall(w.db, O, i.install_id)!.app_config_id).toBe(v1.app_config_id);
    expect(await w.runJobs()).toEqual([]);
  });

  it('the wrong org or an unknown step: not found; a step not awaiting approval: conflict', async () => {
    const w = world();
    const { O, run } = await branchRun(w);
    const [build, planA, deployA] = listSteps(w.db, run.workflow_id);
    expect(() => w.engine.respondToApproval(w.org(), run.workflow_id, planA.step_id, 'approved')).toThrow(NotFoundError);
    expect(() => w.engine.respondToApproval(O, run.workflow_id, 'st_nope', 'approved')).toThrow(NotFoundError);
    for (const s of [build, deployA])
      expect(() => w.engine.respondToApproval(O, run.workflow_id, s.step_id, 'approved')).toThrow(ConflictError);
    expect(statuses(w, run.workflow_id)).toEqual(['skipped', 'awaiting_approval', 'pending', 'pending', 'pending']);
  });

  it(
    'cancel: the started step ends cancelled with an event, pending ones silently, its job is cancelled; a late report is ' +
      'ignored; cancelling again is a conflict',
    async () => {
      const w = world();
      const O = w.org();
      const install = w.install(O, w.config(O));
      await w.runJobs();
      const wf = w.engine.startInstallWorkflow(install, 'reprovision');
      const [job] = (await w.jobs()).filter((j) => j.workflow_id === wf.workflow_id);
      w.report(job, { status: 'started' });
      const kicks = w.outboxKicks;
      const cancelled = w.engine.cancelWorkflow(O, wf.workflow_id);
      expect(cancelled.status).toBe('cancelled');
      expect(w.outboxKicks).toBe(kicks + 1); // one transaction
      expect(statuses(w, wf.workflow_id)).toEqual(['cancelled', 'cancelled', 'cancelled']);
      const expected = [
        'workflow::started',
        'workflow_step:reprovision sandbox:started',
        'workflow_step:reprovision sandbox:cancelled',
        'workflow::cancelled',
      ];
      expect(trail(w.events(), wf.workflow_id)).toEqual(expected);
      expect(getJob(w.db, O, job.job_id)!.status).toBe('cancelled');
      expect(w.report(job, { status: 'succeeded' })).toBe('ignored');
      expect(trail(w.events(), wf.workflow_id)).toEqual(expected);
      expect(await w.jobs()).not.toContainEqual(expect.objectContaining({ workflow_id: wf.workflow_id, operation: 'component.deploy' }));
      expect(() => w.engine.cancelWorkflow(O, wf.workflow_id)).toThrow(ConflictError);
      expect(() => w.engine.cancelWorkflow(w.org(), wf.workflow_id)).toThrow(NotFoundError);
    },
  );
  it(
    'cancel while the job is sent but not started: that step is still pending, so every step ends cancelled silently; a ' +
      'late answer changes nothing',
    async () => {
      const w = world();
      const O = w.org();
      const install = w.install(O, w.config(O));
      await w.runJobs();
      const wf = w.engine.startInstallWorkflow(getInstall(w.db, O, install.install_id)!, 'deprovision');
      const [job] = (await w.jobs()).filter((j) => j.workflow_id === wf.workflow_id);
      expect(getJob(w.db, O, job.job_id)!.status).toBe('sent');
      w.engine.cancelWorkflow(O, wf.workflow_id);
      expect(statuses(w, wf.workflow_id)).toEqual(['cancelled', 'cancelled', 'cancelled']);
      expect(trail(w.events(), wf.workflow_id)).toEqual(['workflow::started', 'workflow::cancelled']);
      expect(w.report(job, { status: 'started' })).toBe('ignored');
      expect(w.report(job, { status: 'succeeded' })).toBe('ignored');
      expect(trail(w.events(), wf.workflow_id)).toEqual(['workflow::started', 'workflow::cancelled']);
      expect(getInstall(w.db, O, install.install_id)!.provisioned).toBe(true); // the deprovision never finished
    },
  );
});

describe("the engine's timers on the clock", () => {
  it(
    'runner health: a pending runner is never unhealthy; one unhealthy event per outage; recovery is silent; a missing ' +
      'process is an outage; inactive is not unhealthy',
    async () => {
      const w = world();
      w.schedule();
      const O = w.org();
      const install = w.install(O, w.config(O));
      await w.runJobs();
      const R = install.runner_id;
      const hb = (process: 'running' | 'missing') =>
        w.ingest({ family: 'runners', orgId: O, id: R, body: { type: 'heartbeat', process } satisfies RunnerMessage });
      const unhealthy = () => w.events().filter((e) => e.type === 'com.svc.runner.unhealthy.v1' && e.data.runner.id === R);
      const checks = (n: number, beat?: 'running' | 'missing') => {
        for (let i = 0; i < n; i++) {
          if (beat) hb(beat);
          w.clock.advance(HEALTH_EVERY_MS);
        }
      };

      checks(3); // pending: no heartbeat yet, no health
      expect(getRunner(w.db, O, R)!.state).toBe('pending');
      expect(unhealthy()).toHaveLength(0);

      checks(4, 'running'); // a heartbeat before every check
      expect(getRunner(w.db, O, R)!.state).toBe('active');
      expect(unhealthy()).toHaveLength(0);

      checks(1); // outage 1: the first check without a heartbeat
      expect(unhealthy()).toHaveLength(1);
      expect(getRunner(w.db, O, R)!.state).toBe('offline');
      checks(5); // however many checks pass
      expect(unhealthy()).toHaveLength(1);
      const ev = unhealthy()[0];
      expect(ev).toMatchObject({
        subject: `${O}/runner_unhealthy/${R}/unhealthy`,
        time: new Date(w.clock.now() - 5 * HEALTH_EVERY_MS).toISOString(),
        data: {
          kind: 'runner_unhealthy',
          transition: 'unhealthy',
          install_id: install.install_id,
          runner: { id: R, group_type: 'install' },
        },
      });

      checks(3, 'running'); // recovery: no event
      expect(getRunner(w.db, O, R)!.state).toBe('active');
      expect(unhealthy()).toHaveLength(1);
      checks(3); // outage 2: once more
      expect(unhealthy()).toHaveLength(2);

      checks(2, 'running');
      expect(w.ingest({ family: 'runners', orgId: O, id: R, body: { type: 'inactive', reason: 'rotation' } })).toEqual(['accepted']);
      expect(
        w
          .events()
          .filter((e) => e.type === 'com.svc.runner.inactive.v1')
          .map((e) => e.data.reason),
      ).toEqual(['rotation']);
      checks(2, 'running');
      expect(unhealthy()).toHaveLength(2);

      checks(3, 'missing'); // heartbeats that say the process is missing: outage 3, once
      expect(unhealthy()).toHaveLength(3);
      expect(unhealthy()[2].data.reason).not.toBe(unhealthy()[0].data.reason);
      // the org's runner never heart-beat: pending, never unhealthy
      expect(w.events().filter((e) => e.type === 'com.svc.runner.unhealthy.v1' && e.data.runner.id !== R)).toEqual([]);
    },
  );

  it(
    `a job sent but not started is sent again with the same job_id once ${JOB_RESEND_MS} ms have passed, not before; a ` +
      `started job never`,
    async () => {
      const w = world();
      w.schedule();
      const O = w.org();
      const install = w.install(O, w.config(O));
      await w.bus.flush();
      expect(w.sent).toHaveLength(1);
      const job = w.sent[0];

      w.clock.advance(JOB_RESEND_MS - 1000); // swept every second: not yet
      await w.bus.flush();
      expect(w.sent).toHaveLength(1);
      w.clock.advance(2000);
      await w.bus.flush();
      expect(w.sent).toHaveLength(2);
      expect(w.sent[1]).toEqual(job);
      w.clock.advance(JOB_RESEND_MS - 1000); // sent again counts from the last sending
      await w.bus.flush();
      expect(w.sent).toHaveLength(2);
      w.clock.advance(2000);
      await w.bus.flush();
      expect(w.sent).toHaveLength(3);

      // started: never sent again, however long it runs
      w.report(job, { status: 'started' });
      w.clock.advance(10 * JOB_RESEND_MS);
      await w.bus.flush();
      expect(w.sent.filter((j) => j.job_id === job.job_id)).toHaveLength(3);
      w.report(job, { status: 'succeeded' });
      const next = (await w.jobs())[1];
      expect(next.operation).toBe('sandbox.provision');
      expect(next.runner_id).toBe(install.runner_id);
    },
  );

  it(
    'scheduled drift scans start a drift_run and a drift_run_reprovision_sandbox for every provisioned install, and none ' +
      'for the others',
    async () => {
      const w = world();
      w.schedule({ driftIntervalMs: DRIFT_EVERY_MS });
      const O = w.org();
      const cfg = w.config(O);
      const a = w.install(O, cfg);
      const b = w.install(O, cfg);
      await w.runJobs();
      const c = w.install(O, cfg); // provisioning, not provisioned
      w.engine.startInstallWorkflow(getInstall(w.db, O, b.install_id)!, 'deprovision');
      await w.runJobs((j) => (j.install_id === c.install_id ? [] : [{ status: 'started' }, { status: 'succeeded' }]));
      expect([a, b, c].map((i) => getInstall(w.db, O, i.install_id)!.provisioned)).toEqual([true, false, false]);
      const scans = (i: Install) =>
        listOwnerWorkflows(w.db, O, i.install_id)
          .filter((x) => x.type.startsWith('drift_run'))
          .map((x) => x.type)
          .sort();

      w.clock.advance(DRIFT_EVERY_MS - 1);
      expect(scans(a)).toEqual([]);
      w.clock.advance(1);
      expect(scans(a)).toEqual(['drift_run', 'drift_run_reprovision_sandbox']);
      expect(scans(b)).toEqual([]);
      expect(scans(c)).toEqual([]);
      const plans = await w.runJobs();
      expect(plans.map((j) => [j.operation, j.plan_only])).toEqual([
        ['component.plan', true],
        ['sandbox.plan', true],
        ['component.plan', true],
      ]);
      w.clock.advance(DRIFT_EVERY_MS);
      expect(scans(a)).toHaveLength(4);
      // drift scans' lifecycle is never an event, and clean plans are no drift
      const types = new Set(
        w
          .events()
          .filter((e) => e.data.workflow?.type?.startsWith('drift_run'))
          .map((e) => e.type),
      );
      expect(types).toEqual(new Set());
    },
  );
});

describe('drift from a plan', () => {
  it(
    'a drift_run plan with a change that is not a no-op emits one drift event for that component; no-op plans and plans of ' +
      'other workflows none',
    async () => {
      const w = world();
      const O = w.org();
      const install = w.install(O, w.config(O));
      await w.runJobs();
      const [api, worker] = listComponents(w.db, install.install_id);
      const drift = () => w.events().filter((e) => e.type === 'com.svc.drift.detected.v1');
      const changes = [
        { address: 'kubernetes_deployment.worker', action: 'update' as const },
        { address: 'kubernetes_service.worker', action: 'no-op' as const },
      ];
      const scan = w.engine.startInstallWorkflow(install, 'drift_run');
      await w.runJobs((j) => [
        { status: 'started' },
        { status: 'succeeded', plan: { changes: j.component_id === worker.component_id ? changes : [{ address: 'x', action: 'no-op' }] } },
      ]);
      expect(getWorkflow(w.db, scan.workflow_id)!.status).toBe('succeeded');
      expect(drift()).toHaveLength(1);
      const step = listSteps(w.db, scan.workflow_id).find((s) => s.name === 'plan worker')!;
      expect(step.plan).toEqual({ changes });
      expect(drift()[0]).toMatchObject({
        subject: `${O}/drift_detected/${scan.workflow_id}/${step.step_id}/detected`,
        data: {
          install_id: install.install_id,
          step: { name: 'plan worker', component_id: worker.component_id },
          drift: { component_id: worker.component_id, changes: [changes[0]] },
        },
      });
      expect(drift()[0].data.drift.component_id).not.toBe(api.component_id);

      // the sandbox scan: drift on the sandbox
      const sb = w.engine.startInstallWorkflow(install, 'drift_run_reprovision_sandbox');
      await w.runJobs(() => [{ status: 'succeeded', plan: { changes: [{ address: 'aws_vpc.main', action: 'replace' }] } }]);
      expect(drift().at(-1).data).toMatchObject({
        workflow: { id: sb.workflow_id },
        drift: { sandbox_id: install.sandbox_id, changes: [{ address: 'aws_vpc.main', action: 'replace' }] },
      });

      // a plan with changes in a deploy is not drift
      w.engine.startInstallWorkflow(install, 'manual_deploy', { component: worker });
      await w.runJobs(() => [{ status: 'succeeded', plan: { changes: [{ address: 'a', action: 'create' }] } }]);
      expect(drift()).toHaveLength(2);
    },
  );
});

describe('group commit and refusals', () => {
  it(
    'one bad item among good ones is {ok: false} and rolled back alone (its state and its events); the others commit ' + 'together',
    async () => {
      const w = world();
      const O = w.org();
      const install = w.install(O, w.config(O));
      const [job] = await w.jobs();
      const [api] = listComponents(w.db, install.install_id);
      // the outbox refuses this one workflow's events: its state is written first, then the insert throws
      w.db.exec(
        "CREATE TEMP TRIGGER refuse_one BEFORE INSERT ON outbox WHEN NEW.subject LIKE '%wfx_refused%' BEGIN SELECT " +
          "RAISE(ABORT, 'injected'); END",
      );
      const workflow = (id: string): WorkflowMessage => ({
        kind: 'workflow',
        transition: 'started',
        workflow: { id, type: 'manual_deploy', owner_id: install.install_id, owner_type: 'installs' },
      });
      const kicks = w.outboxKicks;
      const before = w.events().length;
      const results = w.engine.ingest([
        { family: 'jobs', orgId: O, id: job.job_id, body: { status: 'started' } },
        { family: 'workflows', orgId: O, id: 'wfx_refused', body: workflow('wfx_refused') },
        { family: 'workflows', orgId: O, id: 'wfx_kept', body: workflow('wfx_kept') },
        {
          family: 'health',
          orgId: O,
          id: install.install_id,
          body: { component_id: api.component_id, verdict: 'degraded' } satisfies HealthMessage,
        },
        { family: 'jobs', orgId: O, id: 'job_unknown', body: { status: 'started' } },
        { family: 'runners', orgId: 'org_unknown', id: install.runner_id, body: { type: 'heartbeat', process: 'running' } },
      ]);
      expect(results.map((r) => (r.ok ? r.value : 'refused'))).toEqual([
        'accepted',
        'refused',
        'accepted',
        'accepted',
        'refused',
        'refused',
      ]);
      expect(String(!results[1].ok && results[1].error)).toMatch(/injected/);
      // rolled back alone: no workflow row for it, no event; everything else is there
      expect(getWorkflow(w.db, 'wfx_refused')).toBeUndefined();
      expect(getWorkflow(w.db, 'wfx_kept')!.status).toBe('started');
      expect(
        w
          .events()
          .slice(before)
          .map((e) => e.subject),
      ).toEqual([
        `${O}/workflow_step/${job.workflow_id}/${job.step_id}/started`,
        `${O}/workflow/wfx_kept/started`,
        `${O}/component_health/${install.install_id}/${api.component_id}/unhealthy`,
        `${O}/install_health/${install.install_id}/degraded`,
      ]);
      expect(w.outboxKicks).toBe(kicks + 1); // one commit for the whole batch
      // the refused item can come again once the fault is gone
      w.db.exec('DROP TRIGGER refuse_one');
      expect(w.ingest({ family: 'workflows', orgId: O, id: 'wfx_refused', body: workflow('wfx_refused') })).toEqual(['accepted']);
    },
  );

  it('an unknown org is refused for every family, and nothing is written', () => {
    const w = world();
    const O = w.org();
    const install = w.install(O, w.config(O));
    const before = w.events().length;
    const facts: ProducerFact[] = [
      { family: 'jobs', orgId: 'org_nope', id: 'job_x', body: { status: 'started' } },
      {
        family: 'workflows',
        orgId: 'org_nope',
        id: 'wfx_x',
        body: {
          kind: 'workflow',
          transition: 'started',
          workflow: { id: 'wfx_x', type: 'manual_deploy', owner_id: 'inst_x', owner_type: 'installs' },
        },
      },
      { family: 'runners', orgId: 'org_nope', id: install.runner_id, body: { type: 'inactive' } },
      { family: 'health', orgId: 'org_nope', id: install.install_id, body: { component_id: 'cmp_x', verdict: 'degraded' } },
    ];
    const results = w.engine.ingest(facts);
    for (const r of results) {
      expect(r.ok).toBe(false);
      expect(!r.ok && r.error).toBeInstanceOf(InvalidError);
      expect(String(!r.ok && (r.error as Error).message)).toMatch(/unknown org/);
    }
    expect(getWorkflow(w.db, 'wfx_x')).toBeUndefined();
    expect(getRunner(w.db, O, install.runner_id)!.state).toBe('pending');
    expect(w.events()).toHaveLength(before);
    // and another org's runner cannot be reported under this org
    const other = w.org();
    const [r] = w.engine.ingest([{ family: 'runners', orgId: other, id: install.runner_id, body: { type: 'inactive' } }]);
    expect(r.ok).toBe(false);
    expect(getRunner(w.db, O, install.runner_id)!.state).toBe('pending');
  });
});

describe('workflows a producer reports (CONTRACT 5.2 svc.ingest.<org>.workflows.<id>)', () => {
  const reported = (
    orgId: string,
    id: string,
    body: Omit<WorkflowMessage, 'workflow'> & { workflow?: WorkflowMessage['workflow'] },
  ): ProducerFact => ({ family: 'workflows', orgId, id, body: body as WorkflowMessage });
  const about = (id: string) => ({ id, type: 'provision', owner_id: 'inst_elsewhere', owner_type: 'installs' as const });

  it(
    "the first `started` stores the workflow started, at the clock's time, with one event; repeats are duplicates; a later " +
      'end is timed from it',
    () => {
      const w = world();
      const O = w.org();
      const before = w.events().length;
      const startedAt = new Date(w.clock.now()).toISOString();
      expect(w.ingest(reported(O, 'bwf_1', { kind: 'workflow', transition: 'started', workflow: about('bwf_1') }))).toEqual(['accepted']);
      expect(getWorkflow(w.db, 'bwf_1')).toMatchObject({
        org_id: O,
        external: true,
        external_id: 'bwf_1',
        status: 'started',
        started_at: startedAt,
        finished_at: null,
        error: null,
        owner_id: 'inst_elsewhere',
      });
      expect(w.ingest(reported(O, 'bwf_1', { kind: 'workflow', transition: 'started', workflow: about('bwf_1') }))).toEqual(['duplicate']);
      expect(
        w
          .events()
          .slice(before)
          .map((e) => [e.subject, e.data.workflow.id]),
      ).toEqual([[`${O}/workflow/bwf_1/started`, 'bwf_1']]);
      w.clock.advance(2500);
      expect(w.ingest(reported(O, 'bwf_1', { kind: 'workflow', transition: 'failed', error: 'boom' }))).toEqual(['accepted']);
      expect(getWorkflow(w.db, 'bwf_1')).toMatchObject({
        status: 'failed',
        started_at: startedAt,
        finished_at: new Date(w.clock.now()).toISOString(),
        error: 'boom',
      });
      expect(w.events().at(-1).data.outcome).toEqual({ status: 'failed', duration_ms: 2500, error: 'boom' });
      expect(w.ingest(reported(O, 'bwf_1', { kind: 'workflow', transition: 'started' }))).toEqual(['ignored']);
    },
  );

  it('a first message that ends the workflow starts and ends it at once; a first step message stores the workflow pending', () => {
    const w = world();
    const O = w.org();
    const before = w.events().length;
    expect(w.ingest(reported(O, 'bwf_2', { kind: 'workflow', transition: 'succeeded', workflow: about('bwf_2') }))).toEqual(['accepted']);
    const now = new Date(w.clock.now()).toISOString();
    expect(getWorkflow(w.db, 'bwf_2')).toMatchObject({ status: 'succeeded', started_at: now, finished_at: now, error: null });
    expect(
      w
        .events()
        .slice(before)
        .map((e) => e.data.transition),
    ).toEqual(['started', 'succeeded']);
    const step = { id: 'st_a', name: 'plan', idx: 0, execution_type: 'system' as const };
    expect(w.ingest(reported(O, 'bwf_3', { kind: 'workflow_step', transition: 'started', workflow: about('bwf_3'), step }))).toEqual([
      'accepted',
    ]);
    expect(getWorkflow(w.db, 'bwf_3')!.status).toBe('pending');
    expect(listSteps(w.db, 'bwf_3').map((s) => [s.step_id, s.status, s.started_at, s.finished_at])).toEqual([
      ['st_a', 'started', now, null],
    ]);
    expect(w.events().at(-1)).toMatchObject({
      subject: `${O}/workflow_step/bwf_3/st_a/started`,
      data: { step: { id: 'st_a', name: 'plan', idx: 0 } },
    });
    expect(w.ingest(reported(O, 'bwf_3', { kind: 'workflow_step', transition: 'started', step }))).toEqual(['duplicate']);
    // a new step whose first message ends it: started and ended at once, with its error
    w.clock.advance(100);
    const ended = new Date(w.clock.now()).toISOString();
    expect(
      w.ingest(
        reported(O, 'bwf_3', { kind: 'workflow_step', transition: 'failed', error: 'no quota', step: { ...step, id: 'st_b', idx: 1 } }),
      ),
    ).toEqual(['accepted']);
    expect(listSteps(w.db, 'bwf_3')[1]).toMatchObject({
      step_id: 'st_b',
      status: 'failed',
      error: 'no quota',
      started_at: ended,
      finished_at: ended,
    });
    expect(w.events().at(-1).data.outcome).toEqual({ status: 'failed', duration_ms: 0, error: 'no quota' });
  });

  it(
    "ids are the org's own: another org's workflow of the same id is stored under an id of its own; an id the engine runs " +
      'is refused; no workflow and no first message: refused',
    async () => {
      const w = world();
      const A = w.org();
      const B = w.org();
      expect(w.ingest(reported(A, 'bwf_same', { kind: 'workflow', transition: 'started', workflow: about('bwf_same') }))).toEqual([
        'accepted',
      ]);
      expect(w.ingest(reported(B, 'bwf_same', { kind: 'workflow', transition: 'started', workflow: about('bwf_same') }))).toEqual([
        'accepted',
      ]);
      const b = listOwnerWorkflows(w.db, B, 'inst_elsewhere');
      expect(b).toHaveLength(1);
      expect(b[0].workflow_id).not.toBe('bwf_same');
      expect(b[0]).toMatchObject({ external_id: 'bwf_same', status: 'started' });
      expect(getWorkflow(w.db, 'bwf_same')!.org_id).toBe(A);
      expect(w.events().at(-1).subject).toBe(`${B}/workflow/bwf_same/started`);
      // B's next message reaches B's workflow, not A's
      expect(w.ingest(reported(B, 'bwf_same', { kind: 'workflow', transition: 'succeeded' }))).toEqual(['accepted']);
      expect(getWorkflow(w.db, 'bwf_same')!.status).toBe('started');
      expect(getWorkflow(w.db, b[0].workflow_id)!.status).toBe('succeeded');

      const install = w.install(A, w.config(A));
      const own = provisionOf(w, install);
      const refused = w.engine.ingest([
        reported(A, own.workflow_id, { kind: 'workflow', transition: 'succeeded', workflow: about(own.workflow_id) }),
        reported(A, 'bwf_new', { kind: 'workflow', transition: 'started' }),
      ]);
      expect(refused.map((r) => !r.ok && r.error instanceof InvalidError)).toEqual([true, true]);
      expect(getWorkflow(w.db, own.workflow_id)!.status).toBe('started');
      expect(getWorkflow(w.db, 'bwf_new')).toBeUndefined();
    },
  );
});
