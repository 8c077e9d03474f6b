// The gate snapshot a bake step keeps in its params (machines/health-gate.ts gateSnapshotSchema):
// what the machine produces is what the schema reads back, and a snapshot that is not one is
// refused where it is read instead of being cast and misread.
import { describe, expect, it } from 'vitest';
import { advanceHealthGate, gateSnapshotOf, initialHealthGate } from '../../machines/health-gate.ts';
import { rolloutParamsOf } from '../../src/domain/rollout.ts';

const T0 = 1_000_000;

describe('gate snapshot', () => {
  it('reads back what the machine keeps: baking, then tripped with its cause (through JSON, as the store keeps params)', () => {
    const baking = initialHealthGate({ on: ['unhealthy'], ends_at: T0 + 60_000 });
    const stored = (g: unknown) => JSON.parse(JSON.stringify({ kind: 'bake', gate: g })) as Record<string, unknown>;
    expect(gateSnapshotOf(stored(baking))).toEqual({
      state: 'baking',
      context: { on: ['unhealthy'], ends_at: T0 + 60_000, trip: null, for_ms: 0, streaks: {} },
    });
    const r = advanceHealthGate(baking.state, baking.context, {
      type: 'health',
      install_id: 'inst_1',
      component_id: 'cmp_1',
      verdict: 'unhealthy',
      reason: 'crash loop',
      at: T0,
    });
    const trip = { install_id: 'inst_1', component_id: 'cmp_1', verdict: 'unhealthy', reason: 'crash loop' };
    expect(gateSnapshotOf(stored({ state: r.state, context: r.context }))).toEqual({
      state: 'tripped',
      context: { on: ['unhealthy'], ends_at: T0 + 60_000, trip, for_ms: 0, streaks: { inst_1: { since: T0, trip } } },
    });
  });

  it('reads a snapshot kept before `for` existed as one with no debounce and no streaks', () => {
    const old = { state: 'baking', context: { on: ['unhealthy'], ends_at: T0, trip: null } };
    expect(gateSnapshotOf({ gate: old })).toEqual({
      state: 'baking',
      context: { on: ['unhealthy'], ends_at: T0, trip: null, for_ms: 0, streaks: {} },
    });
  });

  it('a step without a gate has none; a malformed gate is refused', () => {
    expect(gateSnapshotOf({ kind: 'bake' })).toBeUndefined();
    expect(() => gateSnapshotOf({ gate: { state: 'baking', context: { on: ['unhealthy'], ends_at: 'soon', trip: null } } })).toThrow();
    expect(() => gateSnapshotOf({ gate: { state: 'melting', context: { on: [], ends_at: 1, trip: null } } })).toThrow();
  });

  it("a run's health gate and rollout record read from its params; absent ones are null", () => {
    expect(rolloutParamsOf({ app_id: 'app_1' })).toEqual({ gate: null, rollout: null, policy: null });
    const gate = { bake: '10m', bake_ms: 600_000, on: ['unhealthy'], action: 'rollback' };
    const rollout = {
      run_id: 'wf_1',
      trigger: 'health_gate',
      install_id: 'inst_1',
      component_id: 'cmp_1',
      verdict: 'unhealthy',
      reason: null,
    };
    // a gate kept before `for` existed reads as `for: 0s`
    expect(rolloutParamsOf({ health_gate: gate, rollout })).toEqual({ gate: { ...gate, for: '0s', for_ms: 0 }, rollout, policy: null });
    const failedDeploy = {
      run_id: 'wf_1',
      trigger: 'deploy_failed',
      failed_installs: [{ install_id: 'inst_1', workflow_id: 'wf_2', error: 'boom' }],
    };
    expect(rolloutParamsOf({ rollout: failedDeploy }).rollout).toEqual(failedDeploy);
    expect(() => rolloutParamsOf({ rollout: { ...failedDeploy, trigger: 'boredom' } })).toThrow();
    const policy = { max_parallel: 2, max_failed_pct: 20, on_failure: 'rollback', window_timeout: '24h', window_timeout_ms: 86_400_000 };
    expect(rolloutParamsOf({ policy }).policy).toEqual(policy);
    const debounced = { ...gate, for: '3s', for_ms: 3000 };
    expect(rolloutParamsOf({ health_gate: debounced }).gate).toEqual(debounced);
    expect(() => rolloutParamsOf({ health_gate: { ...gate, action: 'explode' } })).toThrow();
  });
});
