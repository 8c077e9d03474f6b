// The one supervisor of svc serve's delivery threads (src/dataplane/thread-supervisor.ts), over a
// real worker thread that speaks the lifecycle (fixtures/lifecycle-thread.ts): start resolves at
// `ready`; the `first` message reaches each thread before anything else; a thread that dies is
// started again RESTART_MS later on the supervisor's clock (a ManualClock here: not before); after
// a drain nothing is started again; a thread that fails before it is ready rejects start.
import type { Worker } from 'node:worker_threads';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import { RESTART_MS, spawnThread, SupervisedThread } from '../../src/dataplane/thread-supervisor.ts';
import { waitFor } from '../helpers/service.ts';

type In = { type: 'echo' } | { type: 'drain' };
type Out = { type: 'echo'; generation: number };

const entry = new URL('./fixtures/lifecycle-thread.ts', import.meta.url);
const logger = pino({ level: 'silent' });

describe('SupervisedThread', () => {
  const running: Array<SupervisedThread<In, Out>> = [];
  afterEach(async () => {
    for (const t of running.splice(0)) await t.drain();
  });

  function supervise(o: { fail?: boolean } = {}) {
    const clock = new ManualClock();
    const spawned: Worker[] = [];
    const echoes: number[] = [];
    let exits = 0;
    const t = new SupervisedThread<In, Out>({
      entry,
      workerData: { fail: o.fail },
      name: 'test thread',
      logger,
      clock,
      // each thread its generation, so that a test can tell a restarted one from the first
      spawn: (e, data) => {
        const w = spawnThread(e, { ...(data as object), generation: spawned.length + 1 });
        spawned.push(w);
        return w;
      },
      first: () => ({ type: 'echo' }),
      onMessage: (m) => echoes.push(m.generation),
      onExit: () => exits++,
    });
    running.push(t);
    return { t, clock, spawned, echoes, exits: () => exits };
  }

  it('starts at ready, restarts a dead thread after RESTART_MS on its clock, and never after a drain', async () => {
    const { t, clock, spawned, echoes, exits } = supervise();
    await t.start();
    expect(t.running).toBe(true);
    await waitFor(() => echoes.length === 1, 5000, 'the first message answered');
    expect(echoes).toEqual([1]);

    await spawned[0].terminate(); // as if it crashed
    await waitFor(() => exits() === 1, 5000, 'the exit seen');
    expect(t.running).toBe(false);
    clock.advance(RESTART_MS - 1);
    expect(spawned, 'not started again before RESTART_MS').toHaveLength(1);
    clock.advance(1);
    expect(spawned).toHaveLength(2);
    await waitFor(() => echoes.length === 2, 5000, 'the restarted thread got the first message too');
    expect(echoes).toEqual([1, 2]);
    t.post({ type: 'echo' });
    await waitFor(() => echoes.length === 3, 5000, 'a message to the thread that runs now');
    expect(echoes[2]).toBe(2);

    await t.drain();
    running.pop();
    expect(t.running).toBe(false);
    expect(exits()).toBe(2);
    clock.advance(10 * RESTART_MS);
    expect(spawned, 'nothing started after the drain').toHaveLength(2);
  });

  it('a thread that fails before it is ready rejects start; the drain stops its restart', async () => {
    const { t, clock, spawned } = supervise({ fail: true });
    await expect(t.start()).rejects.toThrow(/told to fail/);
    await waitFor(() => !t.running, 5000, 'the failed thread gone');
    await t.drain();
    running.pop();
    clock.advance(10 * RESTART_MS);
    expect(spawned).toHaveLength(1);
  });
});
