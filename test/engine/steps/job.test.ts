// The job handler (src/engine/steps/job.ts) on a ManualClock: a job step queues one job for its
// install's runner (sent by the engine after the commit) and waits for it; a hidden job still runs
// where a hidden step of another kind is skipped; a job with no runner fails at once.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { getJob, type WorkflowRow } from '../../../store/workflows.ts';
import type { Install } from '../../../store/installs.ts';
import { createOrg } from '../../../store/orgs.ts';
import type { StepDef } from '../../../src/engine/definitions.ts';
import type { ExecutionType } from '../../../src/domain/status.ts';
import { StepWorld } from './step-world.ts';

const job = (execution_type: ExecutionType = 'system'): StepDef => ({
  name: 'deploy api',
  target_type: 'install_deploys',
  execution_type,
  kind: 'job',
  operation: 'component.deploy',
  runner: 'install',
});

describe('job step', () => {
  let s: StepWorld;
  let install: Install;
  const start = (steps: StepDef[], orgId = s.org, ownerId = install.install_id): WorkflowRow =>
    s.tx((t) => s.runs.start(t, { org_id: orgId, type: 'component_deploy', owner_id: ownerId, owner_type: 'installs', steps }));

  beforeEach(() => {
    s = new StepWorld();
    install = s.install();
  });
  afterEach(() => s.close());

  it("queues one job for the install's runner, sent after the commit, and waits for it", async () => {
    s.clock.advance(2_000);
    const run = start([job()]);
    const step = s.step(run, 'deploy api');
    expect(step.status).toBe('pending');
    const jobId = String(step.params.job_id);
    const queued = getJob(s.db, s.org, jobId)!;
    expect(queued).toMatchObject({ runner_id: install.runner_id, workflow_id: run.workflow_id, step_id: step.step_id });
    expect(queued.payload).toMatchObject({ operation: 'component.deploy', install_id: install.install_id, plan_only: false });
    expect((await s.w.jobs()).filter((j) => j.job_id === jobId)).toHaveLength(1);
    // going on again does not queue a second one
    s.tx((t) => s.runs.advance(t, run.workflow_id));
    expect(s.step(run, 'deploy api').params.job_id).toBe(jobId);
  });

  it('a hidden job still runs; a hidden step of another kind is skipped', () => {
    const run = start([
      { name: 'plan g1', target_type: null, execution_type: 'hidden', kind: 'approval' },
      { ...job('hidden'), name: 'hidden job' },
    ]);
    expect(s.step(run, 'plan g1').status).toBe('skipped');
    expect(s.step(run, 'hidden job').params.job_id).toEqual(expect.any(String));
  });

  it('a job for the org runner of an org that has none fails its step at once, and its run ends failed with it', () => {
    const other = createOrg(s.db, 'no-runner').org.org_id;
    const run = start([{ ...job(), runner: 'org' }], other, 'nobody');
    expect(s.step(run, 'deploy api')).toMatchObject({ status: 'failed', error: 'no runner for this step' });
    // the failure moves the run on by itself (it waited for something else to advance it before)
    expect(s.wf(run.workflow_id).status).toBe('failed');
  });
});
