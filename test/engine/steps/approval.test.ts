// The approval handler (src/engine/steps/approval.ts) on a ManualClock: an approval step awaits a
// person's answer with its group's plan; approving goes on with the run, rejecting fails it; a
// cancel ends the run and its children.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StepDef } from '../../../src/engine/definitions.ts';
import { StepWorld } from './step-world.ts';

const plan = (group: string, installIds: string[]): StepDef => ({
  name: `plan ${group}`,
  target_type: null,
  execution_type: 'approval',
  kind: 'approval',
  params: { group, install_ids: installIds },
});

describe('approval step', () => {
  let s: StepWorld;
  beforeEach(() => {
    s = new StepWorld();
  });
  afterEach(() => s.close());

  it("awaits an answer with its group's plan; approving records who and when and goes on to the next step", () => {
    const install = s.install();
    const run = s.run([plan('g1', [install.install_id]), plan('g2', [])]);
    const asked = s.step(run, 'plan g1');
    expect(asked.status).toBe('awaiting_approval');
    expect(asked.approval).toMatchObject({ status: 'requested' });
    expect(asked.plan).toMatchObject({ install_group: 'g1', installs: [{ install_id: install.install_id, blocked_by: [] }] });
    expect(s.step(run, 'plan g2').status).toBe('pending');

    s.clock.advance(30_000);
    s.tx((t) => s.runs.steps.approval.respondToApproval(t, s.org, run.workflow_id, asked.step_id, 'approved', 'ok', null));
    const approved = s.step(run, 'plan g1');
    expect(approved.status).toBe('succeeded');
    expect(approved.approval).toMatchObject({ status: 'approved', note: 'ok', responded_at: new Date(s.clock.now()).toISOString() });
    expect(s.step(run, 'plan g2').status).toBe('awaiting_approval');
  });

  it('rejecting fails the step and the run; later steps end cancelled', () => {
    const run = s.run([plan('g1', []), plan('g2', [])]);
    const asked = s.step(run, 'plan g1');
    s.tx((t) => s.runs.steps.approval.respondToApproval(t, s.org, run.workflow_id, asked.step_id, 'rejected', 'not now', null));
    expect(s.step(run, 'plan g1')).toMatchObject({ status: 'failed', error: 'approval rejected: not now' });
    expect(s.step(run, 'plan g2').status).toBe('cancelled');
    expect(s.wf(run.workflow_id)).toMatchObject({ status: 'failed' });
  });

  it('a cancel ends the awaiting step and the run cancelled; answering it then is a conflict', () => {
    const run = s.run([plan('g1', [])]);
    const asked = s.step(run, 'plan g1');
    s.tx((t) => s.runs.steps.approval.cancel(t, s.org, run.workflow_id));
    expect(s.step(run, 'plan g1').status).toBe('cancelled');
    expect(s.wf(run.workflow_id).status).toBe('cancelled');
    expect(() =>
      s.tx((t) => s.runs.steps.approval.respondToApproval(t, s.org, run.workflow_id, asked.step_id, 'approved', undefined, null)),
    ).toThrow(/not awaiting approval/);
  });
});
