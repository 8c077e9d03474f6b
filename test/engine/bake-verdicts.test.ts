// The verdicts a bake keeps for its rollout page (issue 56 item 2): each change of an install's
// composite verdict (or of the component behind it), never a repeat, the latest BAKE_VERDICTS_KEPT.
import { describe, expect, it } from 'vitest';
import { BAKE_VERDICTS_KEPT, verdictsSeen } from '../../src/engine/steps/bake.ts';
import type { GateEvent } from '../../machines/health-gate.ts';

const health = (at: number, install_id: string, verdict: 'healthy' | 'degraded' | 'unhealthy', component_id = 'c1'): GateEvent => ({
  type: 'health',
  install_id,
  component_id,
  verdict,
  reason: null,
  at,
});

describe('verdictsSeen', () => {
  it('keeps changes only, per install and component; ticks and repeats change nothing', () => {
    const first = verdictsSeen({}, [health(0, 'a', 'healthy'), health(0, 'b', 'healthy'), { type: 'tick', at: 0 }])!;
    expect(first.map((v) => [v.at, v.install_id, v.verdict])).toEqual([
      [0, 'a', 'healthy'],
      [0, 'b', 'healthy'],
    ]);
    expect(verdictsSeen({ bake_verdicts: first }, [health(5, 'a', 'healthy'), { type: 'tick', at: 6 }])).toBeNull();
    const next = verdictsSeen({ bake_verdicts: first }, [
      health(7, 'a', 'degraded'),
      health(8, 'a', 'degraded', 'c2'),
      health(9, 'b', 'healthy'),
    ])!;
    expect(next.slice(2).map((v) => [v.at, v.install_id, v.component_id, v.verdict])).toEqual([
      [7, 'a', 'c1', 'degraded'],
      [8, 'a', 'c2', 'degraded'],
    ]);
  });

  it(`keeps the latest ${BAKE_VERDICTS_KEPT} of a flapping install`, () => {
    let kept: Record<string, unknown> = {};
    for (let i = 0; i < 500; i++)
      kept = { bake_verdicts: verdictsSeen(kept, [health(i, 'a', i % 2 ? 'degraded' : 'healthy')]) ?? kept.bake_verdicts };
    const v = kept.bake_verdicts as Array<{ at: number }>;
    expect(v).toHaveLength(BAKE_VERDICTS_KEPT);
    expect(v[0].at).toBe(500 - BAKE_VERDICTS_KEPT);
    expect(v.at(-1)!.at).toBe(499);
  });
});
