// The group-deploy handler (src/engine/steps/group-deploy.ts) on a ManualClock: a group's installs
// start as its rollout policy says (max_parallel at once, in creation order, the next as one ends);
// one failure over the budget starts nothing more and fails the group with trigger deploy_failed.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listChildWorkflows, type WorkflowRow } from '../../../store/workflows.ts';
import type { Install } from '../../../store/installs.ts';
import type { StepDef } from '../../../src/engine/definitions.ts';
import { StepWorld } from './step-world.ts';

const deploy = (installIds: string[]): StepDef => ({
  name: 'deploy g1',
  target_type: null,
  execution_type: 'system',
  kind: 'children',
  params: { group: 'g1', install_ids: installIds },
});
const policy = { max_parallel: 1, max_failed_pct: 0, on_failure: null, window_timeout: '24h', window_timeout_ms: 86_400_000 };

describe('group-deploy step', () => {
  let s: StepWorld;
  let installs: Install[];
  let run: WorkflowRow;
  const children = () => listChildWorkflows(s.db, run.workflow_id, s.step(run, 'deploy g1').step_id);

  beforeEach(() => {
    s = new StepWorld();
    s.startChildren = (t, wf, step, only) => {
      for (const id of only ?? []) s.child(t, wf, step, id);
    };
    installs = [];
    for (let i = 0; i < 3; i++) {
      installs.push(s.install());
      s.clock.advance(1_000); // created in this order
    }
    // listed out of order: the group starts them by creation time
    run = s.run([deploy([installs[2], installs[0], installs[1]].map((i) => i.install_id))], { policy });
  });
  afterEach(() => s.close());

  it('starts max_parallel installs at once, in creation order, the next when one ends; succeeds when all did', () => {
    expect(s.step(run, 'deploy g1').status).toBe('started');
    expect(children().map((c) => c.owner_id)).toEqual([installs[0].install_id]);
    s.answer(children()[0], 'approved');
    expect(children().map((c) => c.owner_id)).toEqual([installs[0].install_id, installs[1].install_id]);
    s.answer(children()[1], 'approved');
    s.answer(children()[2], 'approved');
    expect(children().map((c) => c.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect(s.step(run, 'deploy g1').status).toBe('succeeded');
    expect(s.wf(run.workflow_id).status).toBe('succeeded');
  });

  it('a failure over the budget starts nothing more and fails the group and the run, with trigger deploy_failed', () => {
    s.answer(children()[0], 'rejected');
    expect(children()).toHaveLength(1);
    const step = s.step(run, 'deploy g1');
    expect(step.status).toBe('failed');
    expect(step.error).toMatch(/^1 of 3 installs did not apply the config/);
    expect(s.wf(run.workflow_id).status).toBe('failed');
    expect(s.wf(run.workflow_id).params.rollout).toMatchObject({
      trigger: 'deploy_failed',
      failed_installs: [expect.objectContaining({ install_id: installs[0].install_id })],
    });
  });
});
