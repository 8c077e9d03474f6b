// The verify handler (src/engine/steps/verify.ts) on a ManualClock: a verify step is woken at once
// to ask its URLs; a pending answer asks again one interval later on the clock (attempt 2); a pass
// ends the step and the run goes on; a fail fails the group with trigger verification.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { WorkflowRow } from '../../../store/workflows.ts';
import type { Install } from '../../../store/installs.ts';
import type { StepDef } from '../../../src/engine/definitions.ts';
import { StepWorld } from './step-world.ts';

const INTERVAL_MS = 30_000;
const verification = {
  url: 'https://verify.example/check?token=secret',
  secret: null,
  interval: '30s',
  interval_ms: INTERVAL_MS,
  timeout: '5s',
  timeout_ms: 5_000,
  max_wait: '10m',
  max_wait_ms: 600_000,
  failure_limit: 3,
};
const verify = (installIds: string[]): StepDef => ({
  name: 'verify g1',
  target_type: null,
  execution_type: 'system',
  kind: 'verify',
  params: { group: 'g1', install_ids: installIds },
});
const after: StepDef = { name: 'plan g2', target_type: null, execution_type: 'approval', kind: 'approval', params: { group: 'g2' } };

describe('verify step', () => {
  let s: StepWorld;
  let install: Install;
  let run: WorkflowRow;
  const stepId = () => s.step(run, 'verify g1').step_id;
  const tick = () => s.tx((t) => s.runs.steps.verify.tick(t, run.workflow_id, stepId(), []));
  const answer = (verdict: 'pass' | 'fail' | 'pending', reason: string | null = null) =>
    s.tx((t) => s.runs.steps.verify.answer(t, run.workflow_id, stepId(), 0, { verdict, status: 200, error: null, reason }));

  beforeEach(() => {
    s = new StepWorld();
    install = s.install();
    run = s.run([verify([install.install_id]), after], { verification: [verification] });
  });
  afterEach(() => s.close());

  it('is woken at once, asks its URL for the group, asks again an interval after a pending answer, and a pass goes on', () => {
    expect(s.step(run, 'verify g1').status).toBe('started');
    expect(s.verifyWakes).toEqual([`${run.workflow_id}/${stepId()}@${s.clock.now()}`]);
    const first = tick();
    expect(first.asks).toHaveLength(1);
    expect(first.asks[0].request.rollout).toMatchObject({ group: 'g1', attempt: 1, installs: [{ install_id: install.install_id }] });

    const pending = answer('pending');
    expect(pending.wakeAt).toBe(s.clock.now() + INTERVAL_MS);
    expect(tick().asks).toEqual([]); // not due yet
    s.clock.advance(INTERVAL_MS);
    expect(tick().asks.map((a) => a.request.rollout.attempt)).toEqual([2]);

    const passed = answer('pass');
    expect(passed.wakeAt).toBeNull();
    const step = s.step(run, 'verify g1');
    expect(step.status).toBe('succeeded');
    expect(step.params.verify_answers).toEqual([
      expect.objectContaining({ index: 0, attempt: 1, verdict: 'pending' }),
      expect.objectContaining({ index: 0, attempt: 2, verdict: 'pass', at: s.clock.now() }),
    ]);
    expect(s.step(run, 'plan g2').status).toBe('awaiting_approval');
  });

  it('a fail fails the step and the run, with trigger verification and its reason', () => {
    tick();
    answer('fail', 'error rate 12%');
    expect(s.step(run, 'verify g1').status).toBe('failed');
    expect(s.step(run, 'plan g2').status).toBe('cancelled');
    expect(s.wf(run.workflow_id)).toMatchObject({
      status: 'failed',
      params: { rollout: { trigger: 'verification', reason: 'error rate 12%' } },
    });
  });
});
