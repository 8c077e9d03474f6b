// The window handler (src/engine/steps/window.ts) on a ManualClock: an install a deny window holds
// waits in a `wait for change window` step until the window closes, when the wakeup at that moment
// releases it to its group deploy; one held past `window_timeout` fails the group.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { insertChangeWindow } from '../../../store/change-windows.ts';
import { listChildWorkflows } from '../../../store/workflows.ts';
import type { StepDef } from '../../../src/engine/definitions.ts';
import { newId } from '../../../src/domain/ids.ts';
import { StepWorld } from './step-world.ts';

const HOUR = 3_600_000;
const deploy = (installIds: string[]): StepDef => ({
  name: 'deploy g1',
  target_type: null,
  execution_type: 'system',
  kind: 'children',
  params: { group: 'g1', install_ids: installIds },
});
const policy = (timeoutMs: number) => ({
  max_parallel: null,
  max_failed_pct: 0,
  on_failure: null,
  window_timeout: `${timeoutMs / 60_000}m`,
  window_timeout_ms: timeoutMs,
});

describe('window step', () => {
  let s: StepWorld;
  beforeEach(() => {
    s = new StepWorld();
    s.startChildren = (t, wf, step, only) => {
      for (const id of only ?? []) s.child(t, wf, step, id);
    };
    // the clock starts at 2026-01-01T00:00Z: a deny window every day from 00:00 for an hour holds every install now
    insertChangeWindow(s.db, {
      window_id: newId('cw'),
      org_id: s.org,
      app_id: s.config.app_id,
      name: 'freeze',
      kind: 'deny',
      days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'],
      start: '00:00',
      duration: '1h',
      duration_ms: HOUR,
      time_zone: 'UTC',
      install_ids: null,
      selector: null,
      applies_to: null,
      created_at: new Date(s.clock.now()).toISOString(),
    });
  });
  afterEach(() => s.close());

  it('waits until the window closes as the clock advances, then its install starts and the group deploys', () => {
    const install = s.install();
    const run = s.run([deploy([install.install_id])], { policy: policy(24 * HOUR) });
    const wait = s.step(run, `wait for change window: ${install.name}`);
    expect(wait.status).toBe('started');
    expect(wait.params.window).toEqual({
      install_id: install.install_id,
      next_window_at: '2026-01-01T01:00:00.000Z',
      window_ids: [expect.any(String)],
    });
    expect(listChildWorkflows(s.db, run.workflow_id, s.step(run, 'deploy g1').step_id)).toEqual([]);

    s.clock.advance(HOUR - 1);
    expect(s.step(run, wait.name).status).toBe('started');
    s.clock.advance(1);
    expect(s.step(run, wait.name).status).toBe('succeeded');
    const [child] = listChildWorkflows(s.db, run.workflow_id, s.step(run, 'deploy g1').step_id);
    expect(child.owner_id).toBe(install.install_id);

    s.answer(child, 'approved');
    expect(s.step(run, 'deploy g1').status).toBe('succeeded');
    expect(s.wf(run.workflow_id).status).toBe('succeeded');
  });

  it('an install held past window_timeout fails its wait and the group, with trigger window_timeout', () => {
    const install = s.install();
    const run = s.run([deploy([install.install_id])], { policy: policy(10 * 60_000) });
    s.clock.advance(10 * 60_000);
    expect(s.step(run, `wait for change window: ${install.name}`).status).toBe('started');
    s.clock.advance(1);
    expect(s.step(run, `wait for change window: ${install.name}`).status).toBe('failed');
    expect(s.step(run, 'deploy g1').status).toBe('failed');
    expect(s.wf(run.workflow_id).params.rollout).toMatchObject({ trigger: 'window_timeout', install_ids: [install.install_id] });
  });
});
