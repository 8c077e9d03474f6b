// The bake handler (src/engine/steps/bake.ts) on a ManualClock: a gate's bad verdict held past its
// `for` trips the bake at that moment (a wakeup, not the next periodic tick); one that recovers
// sooner does not, and the bake passes once its time is up.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { StepDef } from '../../../src/engine/definitions.ts';
import { StepWorld } from './step-world.ts';

const BAKE_MS = 600_000;
const FOR_MS = 60_000;
const gate = { bake: '10m', bake_ms: BAKE_MS, on: ['unhealthy'], action: 'halt', for: '60s', for_ms: FOR_MS };
const bake = (installIds: string[]): StepDef => ({
  name: 'bake g1',
  target_type: null,
  execution_type: 'system',
  kind: 'bake',
  params: { group: 'g1', install_ids: installIds },
});
const after: StepDef = { name: 'plan g2', target_type: null, execution_type: 'approval', kind: 'approval', params: { group: 'g2' } };

describe('bake step', () => {
  let s: StepWorld;
  beforeEach(() => {
    s = new StepWorld();
  });
  afterEach(() => s.close());

  it('trips on a bad verdict held past `for`: the wakeup at that moment fails the bake and the run, with its rollout', () => {
    const install = s.install();
    const run = s.run([bake([install.install_id]), after], { health_gate: gate });
    expect(s.step(run, 'bake g1').status).toBe('started');
    s.clock.advance(1_000);
    s.health(install, 'unhealthy', 'out of memory');
    s.clock.advance(FOR_MS - 1);
    expect(s.step(run, 'bake g1').status).toBe('started');
    s.clock.advance(1);
    const tripped = s.step(run, 'bake g1');
    expect(tripped.status).toBe('failed');
    expect(tripped.error).toContain('is unhealthy: out of memory');
    expect(s.step(run, 'plan g2').status).toBe('cancelled');
    const wf = s.wf(run.workflow_id);
    expect(wf.status).toBe('failed');
    expect(wf.params.rollout).toMatchObject({ run_id: run.workflow_id, trigger: 'health_gate', install_id: install.install_id });
    // the verdicts it saw are kept for the rollout page
    expect(tripped.params.bake_verdicts).toEqual([expect.objectContaining({ install_id: install.install_id, verdict: 'unhealthy' })]);
  });

  it('a bad verdict that recovers before `for` does not trip; the bake passes once its time is up and the run goes on', () => {
    const install = s.install();
    const run = s.run([bake([install.install_id]), after], { health_gate: gate });
    s.health(install, 'unhealthy');
    s.clock.advance(FOR_MS - 1);
    s.health(install, 'healthy');
    s.clock.advance(BAKE_MS);
    expect(s.step(run, 'bake g1').status).toBe('started');
    s.tx((t) => s.runs.steps.bake.bakeTick(t)); // the scheduler's periodic tick
    expect(s.step(run, 'bake g1').status).toBe('succeeded');
    expect(s.step(run, 'plan g2').status).toBe('awaiting_approval');
  });
});
