// The deploy batch machine (machines/deploy-batch.ts): max_parallel and the failure budget, pure.
import { describe, expect, it } from 'vitest';
import {
  advanceDeployBatch,
  batchSnapshotOf,
  failureBudget,
  initialDeployBatch,
  type BatchEmit,
  type BatchEvent,
  type BatchSnapshot,
} from '../../machines/deploy-batch.ts';

const ids = (n: number) => Array.from({ length: n }, (_, i) => `inst_${i + 1}`);
const ok = (id: string): BatchEvent => ({ type: 'ended', install_id: id, workflow_id: `wf_${id}`, ok: true });
const bad = (id: string, error = 'apply failed'): BatchEvent => ({
  type: 'ended',
  install_id: id,
  workflow_id: `wf_${id}`,
  ok: false,
  error,
});

/** Drive a batch; `answer` ends what it started (in the order given), as the engine would. */
function drive(s: BatchSnapshot, events: BatchEvent[]): { s: BatchSnapshot; emitted: BatchEmit[] } {
  const emitted: BatchEmit[] = [];
  for (const e of events) {
    const r = advanceDeployBatch(s.state, s.context, e);
    s = { state: r.state, context: r.context };
    emitted.push(...r.emitted);
  }
  return { s, emitted };
}

describe('deploy batch machine', () => {
  it('max_parallel 2 over 8: two at a time, in order, the next as each ends; never more than 2 running; all succeed', () => {
    let s = initialDeployBatch({ order: ids(8), max_parallel: 2, budget: 0 });
    const started: string[] = [];
    let running = new Set<string>();
    let peak = 0;
    const feed = (e: BatchEvent) => {
      const r = drive(s, [e]);
      s = r.s;
      for (const m of r.emitted) if (m.type === 'start') for (const id of m.install_ids) started.push(id), running.add(id);
      peak = Math.max(peak, running.size);
      return r.emitted;
    };
    expect(feed({ type: 'begin' })).toEqual([{ type: 'start', install_ids: ['inst_1', 'inst_2'] }]);
    let last: BatchEmit[] = [];
    while (running.size) {
      const first = [...running][0];
      running = new Set([...running].filter((x) => x !== first));
      last = feed(ok(first));
    }
    expect(started).toEqual(ids(8));
    expect(peak).toBe(2);
    expect(s.state).toBe('succeeded');
    expect(last).toEqual([{ type: 'succeeded', failed_installs: [] }]);
  });

  it('all at once without max_parallel; an outcome repeated or of an install never started changes nothing', () => {
    const s = initialDeployBatch({ order: ids(3), max_parallel: null, budget: 0 });
    const r = drive(s, [{ type: 'begin' }, ok('inst_1'), ok('inst_1'), ok('inst_9')]);
    expect(r.emitted).toEqual([{ type: 'start', install_ids: ids(3) }]);
    expect(r.s.context.succeeded).toEqual(['inst_1']);
    expect(advanceDeployBatch(r.s.state, r.s.context, ok('inst_1')).changed).toBe(false);
  });

  it(
    'budget 20 % of 10 (2): 1 failure → the group succeeds listing it; ' +
      '3 failures → it fails and starts nothing more, once the running ones end',
    () => {
      expect(failureBudget(10, 20)).toBe(2);
      expect(failureBudget(7, 20)).toBe(1);
      expect(failureBudget(4, 0)).toBe(0);
      const within = drive(initialDeployBatch({ order: ids(10), max_parallel: null, budget: 2 }), [
        { type: 'begin' },
        bad('inst_3', 'timeout'),
        ...ids(10)
          .filter((x) => x !== 'inst_3')
          .map(ok),
      ]);
      expect(within.s.state).toBe('succeeded');
      expect(within.emitted.at(-1)).toEqual({
        type: 'succeeded',
        failed_installs: [{ install_id: 'inst_3', workflow_id: 'wf_inst_3', error: 'timeout' }],
      });

      // two at a time: the third failure is over the budget; the other running one finishes, nothing new starts
      const over = drive(initialDeployBatch({ order: ids(10), max_parallel: 2, budget: 2 }), [
        { type: 'begin' },
        bad('inst_1'),
        bad('inst_2'),
        ok('inst_3'),
        bad('inst_4'),
      ]);
      expect(over.s.state).toBe('deploying');
      expect(over.s.context.over_budget).toBe(true);
      expect(over.s.context.started).toEqual(['inst_1', 'inst_2', 'inst_3', 'inst_4', 'inst_5']);
      const done = drive(over.s, [ok('inst_5')]);
      expect(done.s.state).toBe('failed');
      expect(done.emitted).toEqual([
        {
          type: 'failed',
          failed_installs: ['inst_1', 'inst_2', 'inst_4'].map((id) => ({ install_id: id, workflow_id: `wf_${id}`, error: 'apply failed' })),
        },
      ]);
      expect(done.s.context.started).not.toContain('inst_6');
    },
  );

  it('budget 0: the first failure fails the group (as before policies)', () => {
    const r = drive(initialDeployBatch({ order: ids(2), max_parallel: null, budget: 0 }), [{ type: 'begin' }, ok('inst_1'), bad('inst_2')]);
    expect(r.s.state).toBe('failed');
  });

  it('an empty group succeeds at once; the snapshot reads back through JSON', () => {
    const r = drive(initialDeployBatch({ order: [], max_parallel: 2, budget: 0 }), [{ type: 'begin' }]);
    expect(r.emitted).toEqual([{ type: 'succeeded', failed_installs: [] }]);
    const kept = JSON.parse(JSON.stringify({ batch: r.s })) as Record<string, unknown>;
    expect(batchSnapshotOf(kept)).toEqual(r.s);
    expect(batchSnapshotOf({})).toBeUndefined();
  });
});

describe('deploy batch machine: change windows', () => {
  it('a held install leaves its slot to the next in order, starts once released, and the group waits for it', () => {
    const s0 = initialDeployBatch({ order: ids(3), max_parallel: 1, budget: 0 });
    const began = drive(s0, [{ type: 'begin' }]);
    expect(began.emitted).toEqual([{ type: 'start', install_ids: ['inst_1'] }]);
    // a window holds inst_1: inst_2 takes the slot
    const held = drive(began.s, [{ type: 'hold', install_ids: ['inst_1'] }]);
    expect(held.emitted).toEqual([{ type: 'start', install_ids: ['inst_2'] }]);
    expect(held.s.context.held).toEqual(['inst_1']);
    // released while inst_2 runs: it waits for the slot, and goes before inst_3
    const released = drive(held.s, [{ type: 'release', install_ids: ['inst_1'] }]);
    expect(released.emitted).toEqual([]);
    const next = drive(released.s, [ok('inst_2')]);
    expect(next.emitted).toEqual([{ type: 'start', install_ids: ['inst_1'] }]);
    const done = drive(next.s, [ok('inst_1'), ok('inst_3')]);
    expect(done.emitted.at(-1)).toEqual({ type: 'succeeded', failed_installs: [] });
  });

  it('a held install timing out halts the group: nothing more starts, the running update finishes, then it fails naming it', () => {
    const s0 = initialDeployBatch({ order: ids(3), max_parallel: 2, budget: 0 });
    const r = drive(s0, [{ type: 'begin' }, { type: 'hold', install_ids: ['inst_1'] }]);
    expect(r.emitted).toEqual([
      { type: 'start', install_ids: ['inst_1', 'inst_2'] },
      { type: 'start', install_ids: ['inst_3'] },
    ]);
    const t = drive(r.s, [{ type: 'timeout', install_ids: ['inst_1'] }]);
    expect(t.emitted).toEqual([]);
    expect(t.s.state).toBe('deploying');
    const end = drive(t.s, [ok('inst_2'), ok('inst_3')]);
    expect(end.s.state).toBe('failed');
    expect(end.emitted).toEqual([{ type: 'failed', failed_installs: [], timed_out: ['inst_1'] }]);
  });
});
