// Fair ingest (CONTRACT §8, issue 16): org A keeps 1,000 requests outstanding while org B sends
// facts one at a time; B's answers stay within 100 ms and every one of A's is still answered ok.
// Real NATS and a real engine (test/helpers/engine.ts) on a file store; each producer runs in a
// thread of its own (test/helpers/ingest-load.mjs), so that what it measures is the time from its
// request to its answer as a producer elsewhere would see it, not the engine's event loop.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fork } from 'node:child_process';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNatsBus, type NatsBus } from '../../src/bus/nats-connection.ts';
import type { Subscription } from '../../src/bus/bus.ts';
import { startIngest } from '../../src/ingest/ingest.ts';
import { EngineWorld, logger } from '../helpers/engine.ts';
import { startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { waitFor } from '../helpers/wait.ts';

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

const LOAD = new URL('../helpers/ingest-load.mjs', import.meta.url);
/** what CONTRACT §8 allows another org's flood to cost */
const BOUND_MS = 100;

/** A producer process; `nice` lowers its priority (a producer elsewhere takes no CPU from the engine). */
function producer(data: Record<string, unknown>, o: { nice?: number } = {}) {
  const child = fork(fileURLToPath(LOAD), { env: { ...process.env, SVC_LOAD: JSON.stringify(data) }, execArgv: [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  if (o.nice) os.setPriority(child.pid!, o.nice);
  const messages: Json[] = [];
  let wake = () => {};
  let exited = false;
  child.on('message', (m) => {
    messages.push(m);
    wake();
  });
  child.on('exit', () => {
    exited = true;
    wake();
  });
  /** the next message carrying `key`, its value */
  const next = async (key: string): Promise<Json> => {
    for (;;) {
      const i = messages.findIndex((m) => key in m);
      if (i >= 0) return messages.splice(i, 1)[0][key];
      if (exited) throw new Error(`the producer ended before it reported ${key}`);
      await new Promise<void>((r) => (wake = r));
    }
  };
  return { child, next, post: (m: string) => child.send(m) };
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const figures = (xs: number[]) => ({ p50: +pct(xs, 50).toFixed(1), p99: +pct(xs, 99).toFixed(1), max: +Math.max(...xs).toFixed(1) });

describe('fair ingest between orgs', () => {
  let nats: NatsServerHandle;
  let bus: NatsBus;
  let w: EngineWorld;
  let sub: Subscription;
  let dir: string;

  beforeAll(async () => {
    nats = await startNatsServer();
    dir = mkdtempSync(path.join(tmpdir(), 'svc-fair-'));
    w = new EngineWorld({ dbFile: path.join(dir, 'svc.db') });
    bus = await createNatsBus(nats.url, { name: 'svc-fairness', logger });
    sub = startIngest({ bus, logger, metrics: w.metrics, engine: w.engine });
  });
  afterAll(async () => {
    sub?.unsubscribe();
    await bus?.close();
    w?.close();
    await nats?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  // Every attempt is a whole measurement. Retried because a machine shared with other work stalls
  // a process now and then for ~100 ms whatever it runs (seen at a load of 10 on 2 cores: one of
  // ~350 groups of ~40 facts took 219 ms); the engine's own part is ~2 groups of 10 ms.
  it("answers org B within 100 ms while org A keeps 1,000 requests outstanding, and answers all of A's", { retry: 2, timeout: 120_000 }, async () => {
    const A = w.org();
    const B = w.org();
    const paced = async (count: number) => {
      const b = producer({ url: nats.url, org: B, mode: 'paced', count });
      const r = await b.next('done');
      b.child.kill();
      expect(r.answers).toEqual(r.answers.map(() => ({ ok: true })));
      return r.latencies as number[];
    };

    const alone = await paced(50);

    const a = producer({ url: nats.url, org: A, mode: 'flood', outstanding: 1000 });
    await a.next('started');
    const progress = async () => (a.post('progress'), (await a.next('progress')) as number);
    // the flood in full flow: thousands of A's facts committed before B starts
    await waitFor(
      async () => (await progress()) >= 3000,
      60_000,
      "3,000 of org A's facts answered",
    );
    const before = await progress();
    const flooded = await paced(100);
    const during = (await progress()) - before;
    a.post('stop');
    const tally = await a.next('done');
    a.child.kill();

    console.log(
      `org B's answers alone ${JSON.stringify(figures(alone))} ms; with org A flooding ${JSON.stringify(figures(flooded))} ms; ` +
        `org A: ${during} answered while B sent its 100, ${JSON.stringify(tally)}`,
    );
    expect(tally.errors).toEqual([]);
    expect(tally.ok).toBe(tally.sent);
    // A's flood went on all the while B was measured: far more of A's facts than B's committed
    expect(during).toBeGreaterThan(1000);
    expect(Math.max(...flooded)).toBeLessThanOrEqual(BOUND_MS);
  });
});
