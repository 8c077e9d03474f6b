// The health gate machine (machines/health-gate.ts): pure, time given in its events.
import { describe, expect, it } from 'vitest';
import { advanceHealthGate, initialHealthGate, type GateContext, type GateEvent, type GateStatus } from '../../machines/index.ts';

const T0 = 1_000_000;
const bad = (verdict: 'degraded' | 'unhealthy' | 'healthy', reason?: string): GateEvent => ({ type: 'health', install_id: 'inst_1', component_id: 'cmp_1', verdict, reason });

function run(on: Array<'degraded' | 'unhealthy'>, events: GateEvent[]) {
  let s: { state: GateStatus; context: GateContext } = initialHealthGate({ on, ends_at: T0 + 600_000 });
  const emitted: unknown[] = [];
  for (const e of events) {
    const r = advanceHealthGate(s.state, s.context, e);
    s = { state: r.state, context: r.context };
    emitted.push(...r.emitted);
  }
  return { ...s, emitted };
}

describe('health gate machine', () => {
  it('passes when the bake is over, not a millisecond before; healthy verdicts change nothing', () => {
    const early = run(['degraded', 'unhealthy'], [bad('healthy'), { type: 'tick', at: T0 + 599_999 }]);
    expect(early).toMatchObject({ state: 'baking', emitted: [] });
    const done = run(['degraded', 'unhealthy'], [{ type: 'tick', at: T0 + 600_000 }]);
    expect(done).toMatchObject({ state: 'passed', emitted: [{ type: 'passed' }] });
  });

  it('trips on a verdict named in `on`, once, with its cause; ignores verdicts not in `on`; a finished gate accepts nothing', () => {
    const r = run(['unhealthy'], [bad('degraded', 'slow'), bad('unhealthy', 'crash'), bad('unhealthy', 'again'), { type: 'tick', at: T0 + 600_000 }]);
    const trip = { install_id: 'inst_1', component_id: 'cmp_1', verdict: 'unhealthy', reason: 'crash' };
    expect(r).toMatchObject({ state: 'tripped', context: { trip }, emitted: [{ type: 'tripped', trip }] });
    const passed = run(['degraded'], [{ type: 'tick', at: T0 + 600_000 }, bad('degraded')]);
    expect(passed).toMatchObject({ state: 'passed', emitted: [{ type: 'passed' }] });
  });
});
