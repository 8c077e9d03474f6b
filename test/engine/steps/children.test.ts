// The children handler (src/engine/steps/children.ts) on a ManualClock: a step that starts child
// workflows ends when they all ended (failed when one did not succeed); a refusal fails it at once;
// children that end while they are being started settle it once every one is started.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listChildWorkflows, type WorkflowRow } from '../../../store/workflows.ts';
import type { Install } from '../../../store/installs.ts';
import type { StepDef } from '../../../src/engine/definitions.ts';
import { StepWorld } from './step-world.ts';

const apply: StepDef = { name: 'apply config', target_type: null, execution_type: 'system', kind: 'children' };

describe('children step', () => {
  let s: StepWorld;
  let installs: Install[];
  const children = (run: WorkflowRow) => listChildWorkflows(s.db, run.workflow_id, s.step(run, 'apply config').step_id);

  beforeEach(() => {
    s = new StepWorld();
    installs = [s.install(), s.install()];
    s.startChildren = (t, wf, step) => {
      for (const i of installs) s.child(t, wf, step, i.install_id);
    };
  });
  afterEach(() => s.close());

  it('waits for every child workflow, then succeeds and the run goes on', () => {
    const run = s.run([apply]);
    expect(s.step(run, 'apply config').status).toBe('started');
    expect(children(run)).toHaveLength(2);
    s.clock.advance(5_000);
    s.answer(children(run)[0], 'approved');
    expect(s.step(run, 'apply config').status).toBe('started');
    s.answer(children(run)[1], 'approved');
    const step = s.step(run, 'apply config');
    expect(step.status).toBe('succeeded');
    expect(step.finished_at).toBe(new Date(s.clock.now()).toISOString());
    expect(s.wf(run.workflow_id).status).toBe('succeeded');
  });

  it('one child that did not succeed fails the step once all ended', () => {
    const run = s.run([apply]);
    s.answer(children(run)[0], 'rejected');
    expect(s.step(run, 'apply config').status).toBe('started');
    s.answer(children(run)[1], 'approved');
    expect(s.step(run, 'apply config').error).toBe('1 of 2 installs did not apply the config');
    expect(s.wf(run.workflow_id).status).toBe('failed');
  });

  it('a refusal fails the step at once with its message; children with nothing to do end it at once', () => {
    s.startChildren = () => 'config vetoed';
    const refused = s.run([apply]);
    expect(s.step(refused, 'apply config')).toMatchObject({ status: 'failed', error: 'config vetoed' });
    s.startChildren = (t, wf, step) => {
      for (const i of installs)
        s.runs.start(t, {
          org_id: s.org,
          type: 'app_config_update',
          owner_id: i.install_id,
          owner_type: 'installs',
          parent: { workflow_id: wf.workflow_id, step_id: step.step_id, kind: 'workflow_step' },
          steps: [],
        });
    };
    const empty = s.run([apply]);
    expect(children(empty).map((c) => c.status)).toEqual(['succeeded', 'succeeded']);
    expect(s.step(empty, 'apply config').status).toBe('succeeded');
  });
});
