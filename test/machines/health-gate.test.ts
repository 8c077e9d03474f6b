// The health gate machine (machines/health-gate.ts): pure, time given in its events.
import { describe, expect, it } from 'vitest';
import { advanceHealthGate, initialHealthGate, type GateContext, type GateEvent, type GateStatus } from '../../machines/health-gate.ts';

const T0 = 1_000_000;
const bad = (
  verdict: 'degraded' | 'unhealthy' | 'healthy',
  reason?: string,
  at = T0,
  install = 'inst_1',
  component = 'cmp_1',
): GateEvent => ({ type: 'health', install_id: install, component_id: component, verdict, reason, at });
const tick = (at: number): GateEvent => ({ type: 'tick', at });

function run(on: Array<'degraded' | 'unhealthy'>, events: GateEvent[], forMs = 0, endsAt = T0 + 600_000) {
  let s: { state: GateStatus; context: GateContext } = initialHealthGate({ on, ends_at: endsAt, for_ms: forMs });
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
    const r = run(
      ['unhealthy'],
      [bad('degraded', 'slow'), bad('unhealthy', 'crash'), bad('unhealthy', 'again'), { type: 'tick', at: T0 + 600_000 }],
    );
    const trip = { install_id: 'inst_1', component_id: 'cmp_1', verdict: 'unhealthy', reason: 'crash' };
    expect(r).toMatchObject({ state: 'tripped', context: { trip }, emitted: [{ type: 'tripped', trip }] });
    const passed = run(['degraded'], [{ type: 'tick', at: T0 + 600_000 }, bad('degraded')]);
    expect(passed).toMatchObject({ state: 'passed', emitted: [{ type: 'passed' }] });
  });

  describe('with `for` (a bad verdict must stay bad that long)', () => {
    const FOR = 3000;
    it('bad, then good within 1 s: no trip, and the bake passes at its end', () => {
      const r = run(
        ['degraded', 'unhealthy'],
        [bad('degraded', 'slow', T0), tick(T0 + 500), bad('healthy', undefined, T0 + 900), tick(T0 + 3000), tick(T0 + 10_000)],
        FOR,
        T0 + 10_000,
      );
      expect(r).toMatchObject({ state: 'passed', emitted: [{ type: 'passed' }] });
    });

    it('bad for 3 s trips at 3 s, not a millisecond before, with the first bad verdict of the streak', () => {
      const events = [bad('degraded', 'slow', T0), tick(T0 + 1000), bad('degraded', 'slower', T0 + 2000), tick(T0 + 2999)];
      expect(run(['degraded'], events, FOR)).toMatchObject({ state: 'baking', emitted: [] });
      const trip = { install_id: 'inst_1', component_id: 'cmp_1', verdict: 'degraded', reason: 'slow' };
      expect(run(['degraded'], [...events, tick(T0 + 3000)], FOR)).toMatchObject({
        state: 'tripped',
        context: { trip },
        emitted: [{ type: 'tripped', trip }],
      });
    });

    it('flaps do not add up: each good verdict starts the count again', () => {
      const events: GateEvent[] = [];
      for (let i = 0; i < 10; i++)
        events.push(bad('unhealthy', 'flap', T0 + i * 2000), tick(T0 + i * 2000 + 1500), bad('healthy', undefined, T0 + i * 2000 + 1600));
      expect(run(['unhealthy'], events, FOR, T0 + 60_000)).toMatchObject({ state: 'baking', emitted: [] });
    });

    it('a verdict not in `on`, or another component going bad, ends the streak; another install has its own', () => {
      // unhealthy → degraded (not watched) → unhealthy: the streak starts again at 2 s
      const r1 = run(
        ['unhealthy'],
        [bad('unhealthy', 'a', T0), bad('degraded', 'b', T0 + 1000), bad('unhealthy', 'c', T0 + 2000), tick(T0 + 4000)],
        FOR,
      );
      expect(r1).toMatchObject({ state: 'baking', emitted: [] });
      expect(
        run(
          ['unhealthy'],
          [bad('unhealthy', 'a', T0), bad('degraded', 'b', T0 + 1000), bad('unhealthy', 'c', T0 + 2000), tick(T0 + 5000)],
          FOR,
        ),
      ).toMatchObject({ state: 'tripped', context: { trip: { reason: 'c' } } });
      // the install's composite verdict moves to another component: a new streak from then
      const r2 = run(
        ['degraded'],
        [bad('degraded', 'x', T0, 'inst_1', 'cmp_1'), bad('degraded', 'y', T0 + 2000, 'inst_1', 'cmp_2'), tick(T0 + 4000)],
        FOR,
      );
      expect(r2).toMatchObject({ state: 'baking', emitted: [] });
      // two installs: the older streak trips first, and one install's good verdict leaves the other's streak running
      const r3 = run(
        ['degraded'],
        [
          bad('degraded', 'one', T0, 'inst_1'),
          bad('degraded', 'two', T0 + 1000, 'inst_2'),
          bad('healthy', undefined, T0 + 1500, 'inst_1'),
          tick(T0 + 3500),
          tick(T0 + 4000),
        ],
        FOR,
      );
      expect(r3).toMatchObject({ state: 'tripped', context: { trip: { install_id: 'inst_2', reason: 'two' } } });
    });

    it('a bake whose time is up while a streak runs waits for it: passes when it ends, trips when it lasts', () => {
      const end = T0 + 2000;
      const waiting = [bad('degraded', 'late', T0 + 1500), tick(end), tick(end + 1000)];
      expect(run(['degraded'], waiting, FOR, end)).toMatchObject({ state: 'baking', emitted: [] });
      expect(run(['degraded'], [...waiting, bad('healthy', undefined, end + 1200)], FOR, end)).toMatchObject({
        state: 'passed',
        emitted: [{ type: 'passed' }],
      });
      expect(run(['degraded'], [...waiting, tick(T0 + 4500)], FOR, end)).toMatchObject({
        state: 'tripped',
        emitted: [{ type: 'tripped' }],
      });
    });
  });
});
