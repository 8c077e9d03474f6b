// Producer facts per org as a rate (CONTRACT §8, §9 --ingest-rate-per-org; issue 49): org A sends
// three times its rate, org B sends 60 facts 40 ms apart beside it. A's excess is answered
// `{"ok": false, "error": "rate_limited", "retry_after_ms": N}` (counted svc_rate_limited_total
// {what="ingest"}), A gets no more than its burst and its rate, and B's answers stay within 100 ms,
// all ok, in every one of RUNS runs. Real NATS and a real engine on a file store, a fresh one each
// run; each producer in a process of its own (test/helpers/load-process.ts), A's at a lower
// priority. The rate is low (500 facts/s) so that the test is cheap.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNatsBus, type NatsBus } from '../../src/bus/nats/nats-connection.ts';
import { startIngest } from '../../src/ingest/ingest.ts';
import { BURST_SECONDS } from '../../src/ingest/org-rate.ts';
import { EngineWorld, logger } from '../helpers/engine.ts';
import { figures, producer, type Figures } from '../helpers/load-process.ts';
import { startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { waitFor } from '../helpers/wait.ts';

const BOUND_MS = 100;
const RUNS = Number(process.env.SVC_FAIRNESS_RUNS ?? 5);
/** --ingest-rate-per-org of the test, and A's rate: three times it */
const RATE = 500;
const A_SECONDS = 6;
const B_FACTS = 60;
const B_INTERVAL_MS = 40;

describe('producer facts per org as a rate', () => {
  let nats: NatsServerHandle;
  let bus: NatsBus;

  beforeAll(async () => {
    nats = await startNatsServer();
    bus = await createNatsBus(nats.url, { name: 'svc-ingest-rate', logger });
  });
  afterAll(async () => {
    await bus?.close();
    await nats?.stop();
  });

  async function run(i: number): Promise<{ run: number; b: Figures; a: { sent: number; ok: number; limited: number; ms: number } }> {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-rate-'));
    const w = new EngineWorld({ dbFile: path.join(dir, 'svc.db') });
    const sub = startIngest({ bus, logger, metrics: w.metrics, engine: w.engine, ratePerOrg: RATE });
    const A = w.org();
    const B = w.org();
    const a = producer({ url: nats.url, org: A, mode: 'rate', perSecond: 3 * RATE, seconds: A_SECONDS }, { nice: 10 });
    try {
      const limited = async () => (await w.metrics.rateLimited.get()).values.find((v) => v.labels.what === 'ingest')?.value ?? 0;
      // A is over its rate (its burst spent) before B starts
      await waitFor(async () => (await limited()) > 0, 20_000, "org A's first rate_limited answer");
      const b = producer({ url: nats.url, org: B, mode: 'paced', count: B_FACTS, intervalMs: B_INTERVAL_MS });
      const paced = await b.next('done');
      b.child.kill();
      const tally = await a.next('done');
      // B: never limited, every answer within the bound
      expect(paced.answers).toEqual(paced.answers.map(() => ({ ok: true })));
      // A: refused past its burst and rate, with the time of its next token; answered nothing else
      expect(tally.other).toEqual([]);
      expect(tally.ok + tally.limited).toBe(tally.sent);
      expect(tally.limited).toBeGreaterThan(0);
      expect(tally.ok).toBeLessThanOrEqual(RATE * BURST_SECONDS + RATE * (tally.ms / 1000));
      expect(tally.ok).toBeGreaterThanOrEqual(RATE * BURST_SECONDS + RATE * (A_SECONDS - 1));
      expect(tally.retryAfterMs[0]).toBeGreaterThanOrEqual(1);
      expect(tally.retryAfterMs[1]).toBeLessThanOrEqual(Math.ceil(1000 / RATE));
      expect(await limited()).toBe(tally.limited);
      return { run: i, b: figures(paced.latencies), a: tally };
    } finally {
      a.child.kill();
      sub.unsubscribe();
      w.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it(`refuses org A's facts past ${RATE}/s (A at three times it) with rate_limited, while org B's answers stay within ${BOUND_MS} ` +
    `ms, in each of ${RUNS} runs`, {
    timeout: RUNS * 30_000,
  }, async () => {
    const runs = [];
    for (let i = 1; i <= RUNS; i++) {
      const r = await run(i);
      runs.push(r);
      console.log(
        `run ${i}: org B's answers ${JSON.stringify(r.b)} ms; org A sent ${r.a.sent} in ${r.a.ms} ms: ${r.a.ok} ok, ${r.a.limited} ` +
          `rate_limited`,
      );
    }
    expect(runs.filter((r) => r.b.max > BOUND_MS).map((r) => `run ${r.run}: ${r.b.max} ms`)).toEqual([]);
  });
});
