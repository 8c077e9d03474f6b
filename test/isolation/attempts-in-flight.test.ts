// Slots follow what attempts hold now (CONTRACT 8, 0.3 "No request holds the engine", second
// bullet; issue 49 items 2 and 3), end to end: a real svc in this process (real SQLite file, real
// HTTP receivers), in embedded mode (delivery on its own thread over the outbox) and NATS mode (a
// real nats-server on a free port, the data plane in the engine's process).
//
//  1. The alternating attack. Org A has 40 webhooks whose receiver answers at once for 1 s of every
//     6 s and holds every other request past the delivery timeout, and a steady stream of events;
//     org B has one webhook on a fast receiver (the same host) and events at a modest rate. B's
//     slowest delivery (its fact's commit, the producer's {ok: true} → B's receiver getting the
//     event) is within 1 s, in every run. A's webhooks turn fast in each fast phase (its breaker
//     closes) and then hang: what they answered before says nothing of what their attempts hold
//     now. Before eab3c3b the issue measured B's max at 4,177 ms (embedded mode, 5 s timeout).
//  2. Ping, then resend. A's 100 webhooks answer a ping at once, then hang on a resend of a kept
//     event (all 100 sent from the dashboard, which holds no API seat: the API's 16 seats per org
//     would let only 16 of them reach the slots); B's ping answers within 1 s while they hang,
//     before and after they have run longer than a fast attempt, every run.
//  3. Within one org: 40 of the org's webhooks flapping as in 1, beside the org's own fast webhook
//     that gets every event too: the fast webhook's deliveries are within 1 s of their commit.
//
// Time is scaled to keep the file short: a 2 s delivery timeout (--delivery-timeout) instead of
// 5 s, and the attack's cycle scaled with it (fast 400 ms of every 2,400 ms; a held request is held
// until svc gives up on it). The bound stays 1 s: it is the contract's. Each run makes new orgs,
// webhooks and receivers on the same svc process (what carries over is the process's own state).
// ATTEMPTS_RUNS lowers the number of runs (default 10) for a local try.
//
// Each run can fail. On the slots before eab3c3b (src/dataplane/slots.ts and pipeline.ts from
// eab3c3b~1 in a copy of the tree, 5 runs of each case in each mode, 2 cores) every run failed: the
// webhooks known fast took the reserve too, so A held all 256 delivery slots (64 of 64 ping/resend
// slots) and the victim waited for one of A's attempts to time out. Case 1, B's max per run 1,309-
// 1,409 ms embedded, 1,292-1,442 ms NATS; case 2, B's first ping 1,685-1,856 ms embedded, 1,668-
// 1,950 ms NATS; case 3, 1,458 and 1,460 ms. At eab3c3b (10 runs): case 1 max 5-193 ms embedded,
// 9-367 ms NATS (A held 240 at most); case 2 at most 113 ms (A held 62); case 3 at most 43 ms.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dashboardSession } from '../helpers/dashboard.ts';
import { startFlappingReceiver, type FlappingReceiver } from '../helpers/flapping-receiver.ts';
import { rid } from '../helpers/ids.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startService, waitFor, type ApiClient, type TestService } from '../helpers/service.ts';
import { factProducer, type FactProducer } from '../helpers/tenancy.ts';
import { createWebhook } from '../helpers/webhooks.ts';
import { pause } from '../helpers/wait.ts';

const RUNS = Math.max(1, Number(process.env.ATTEMPTS_RUNS ?? '10'));
/** case 3's runs */
const SAME_ORG_RUNS = Math.max(1, Math.ceil(RUNS / 5));
/** --delivery-timeout, and the scale of the issue's 6 s cycle against its 5 s timeout */
const TIMEOUT_MS = 2000;
const SCALE = TIMEOUT_MS / 5000;
const FAST_MS = 1000 * SCALE;
const CYCLE_MS = 6000 * SCALE;
/** cycles per run of cases 1 and 3: fast, hang, fast again, and most of the second hang */
const CYCLES = 1.75;
const FLAPPING = 40;
const A_EVERY_MS = 100;
const B_EVERY_MS = 100;
const RESENDERS = 100;
/** CONTRACT 8: another org's receivers, or the org's other webhooks, delay a delivery by at most this */
const BOUND_MS = 1000;

const modes = findNatsServer() ? (['embedded', 'nats'] as const) : (['embedded'] as const);

const sorted = (xs: number[]) => [...xs].sort((x, y) => x - y);
const p50 = (xs: number[]) => sorted(xs)[Math.floor((xs.length - 1) / 2)];
const max = (xs: number[]) => Math.max(...xs);

/** Call fn every `everyMs` (on the wall clock, not waiting for the previous call) until `until`; all its results. */
async function paced<T>(everyMs: number, until: number, fn: () => Promise<T>): Promise<T[]> {
  const calls: Array<Promise<T>> = [];
  for (let next = Date.now(); Date.now() < until; next += everyMs) {
    calls.push(fn());
    await pause(Math.max(0, next + everyMs - Date.now()), 'calls paced on the wall clock');
  }
  return Promise.all(calls);
}

/** Webhooks created through the API, 16 at a time (an org's API seats). */
async function createWebhooks(api: ApiClient, urls: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < urls.length; i += 16) ids.push(...(await Promise.all(urls.slice(i, i + 16).map((u) => createWebhook(api, u)))));
  return ids;
}

/** When the receiver got the event of each workflow at a path (its `started` event), by workflow id. */
function receivedAt(rx: FlappingReceiver, name: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of rx.at(name)) {
    const id = r.json?.data?.workflow?.id;
    if (typeof id === 'string' && !out.has(id)) out.set(id, r.at);
  }
  return out;
}

describe.each(modes)('slots follow attempts in flight, end to end (%s mode, CONTRACT 8)', (mode) => {
  let nats: NatsServerHandle | null = null;
  let svc: TestService;
  let producer: FactProducer;

  beforeAll(async () => {
    if (mode === 'nats') nats = await startNatsServer();
    svc = await startService({ natsUrl: nats?.url ?? null, localRunner: false, deliveryTimeoutMs: TIMEOUT_MS });
    producer = await factProducer({ natsUrl: nats?.url ?? null, bus: svc.server.bus });
  }, 60_000);

  afterAll(async () => {
    await producer?.close();
    await svc?.stop();
    await nats?.stop();
  });

  /** Commit one fact of the org; its workflow id and when it was committed (the producer's answer). */
  async function commit(orgId: string, committedAt: Map<string, number>): Promise<string> {
    const id = await producer.fact(orgId);
    committedAt.set(id, Date.now());
    return id;
  }

  /**
   * One run of the flapping attack: the flapping paths of rx (the attacker's webhooks) cycle from
   * now on, for CYCLES cycles, while the attacker commits a fact every A_EVERY_MS and `victim` a fact every B_EVERY_MS
   * (the victim may be the attacker itself). The victim's delays at rx's `victimHook` path, commit to receipt.
   */
  async function flapRun(rx: FlappingReceiver, attacker: string, victim: string, victimHook: string) {
    const committedA = new Map<string, number>();
    const committedB = new Map<string, number>();
    rx.startCycle(FAST_MS, CYCLE_MS);
    const until = Date.now() + CYCLES * CYCLE_MS;
    await Promise.all([
      paced(A_EVERY_MS, until, () => commit(attacker, committedA)),
      victim === attacker ? Promise.resolve() : paced(B_EVERY_MS, until, () => commit(victim, committedB)),
    ]);
    const mine = victim === attacker ? committedA : committedB;
    await waitFor(
      () => receivedAt(rx, victimHook).size >= mine.size,
      15_000,
      () => `the victim's ${mine.size} deliveries (got ${receivedAt(rx, victimHook).size})`,
    );
    const got = receivedAt(rx, victimHook);
    const delays = [...mine].map(([id, t]) => got.get(id)! - t);
    const flaps = rx.all.filter((r) => r.path.startsWith('/h/a'));
    return {
      delays,
      maxHeld: rx.maxHeld(),
      fastA: flaps.filter((r) => r.fast).length,
      heldA: flaps.filter((r) => !r.fast).length,
      // A's webhooks answered in the second fast phase too (its breakers closed again: the attack repeats)
      fastAgain: flaps.filter((r) => r.fast && r.at - (until - CYCLES * CYCLE_MS) >= CYCLE_MS).length,
    };
  }

  it(`the alternating attack: B's slowest delivery stays within 1 s beside A's ${FLAPPING} flapping webhooks, in each of ${RUNS} runs`, {
    timeout: 60_000 + RUNS * 20_000,
  }, async () => {
    const runs: Array<{
      run: number;
      p50: number;
      max: number;
      n: number;
      maxHeld: number;
      fastA: number;
      heldA: number;
      fastAgain: number;
    }> = [];
    for (let run = 0; run < RUNS; run++) {
      const a = svc.createOrg(rid('orga'));
      const b = svc.createOrg(rid('orgb'));
      const rx = await startFlappingReceiver();
      try {
        const names = Array.from({ length: FLAPPING }, (_, i) => `a${i}`);
        for (const n of names) rx.set(n, 'flap');
        await createWebhooks(
          svc.api(a),
          names.map((n) => rx.hook(n)),
        );
        await createWebhook(svc.api(b), rx.hook('b'));
        const r = await flapRun(rx, a.org_id, b.org_id, 'b');
        runs.push({
          run,
          p50: p50(r.delays),
          max: max(r.delays),
          n: r.delays.length,
          maxHeld: r.maxHeld,
          fastA: r.fastA,
          heldA: r.heldA,
          fastAgain: r.fastAgain,
        });
      } finally {
        await rx.close(); // A's held attempts fail now, the rest of its queue fails fast
      }
      await svc.settled(60_000);
    }
    const perRun = [...runs]
      .sort((x, y) => y.max - x.max)
      .map((r) => `#${r.run} ${r.p50}/${r.max} of ${r.n} (A ${r.maxHeld}, ${r.fastA}, ${r.heldA}, ${r.fastAgain})`)
      .join('; ');
    const report =
      `${mode}: B's delays per run, worst first ` +
      `(p50/max ms of n; A's most held at once, answered fast, held, fast in the 2nd cycle): ${perRun}`;
    console.log(report);
    for (const r of runs) {
      // the attack was real: A's receivers held most slots at once, and A's webhooks turned fast again
      expect(r.maxHeld, report).toBeGreaterThanOrEqual(200);
      expect(r.fastAgain, report).toBeGreaterThan(0);
      expect(r.max, report).toBeLessThanOrEqual(BOUND_MS);
    }
  });

  it(`ping, then resend: B's ping answers within 1 s while A's ${RESENDERS} webhooks, fast at a ping, hang on a resend, in each of ` +
    `${RUNS} runs`, {
    timeout: 60_000 + RUNS * 20_000,
  }, async () => {
    const runs: Array<{ run: number; pings: number[]; held: number[] }> = [];
    for (let run = 0; run < RUNS; run++) {
      const a = svc.createOrg(rid('orga'));
      const b = svc.createOrg(rid('orgb'));
      const rx = await startFlappingReceiver();
      let resends: Array<Promise<Response>> = [];
      try {
        const names = Array.from({ length: RESENDERS }, (_, i) => `a${i}`);
        const hooksA = await createWebhooks(
          svc.api(a),
          names.map((n) => rx.hook(n)),
        );
        const hookB = await createWebhook(svc.api(b), rx.hook('b'));
        // one kept event of A, to resend; its own deliveries (fast) done first
        const wf = await producer.fact(a.org_id);
        const ev = await waitFor(
          async () => (await svc.api(a).get('/v1/events')).body?.data?.[0] ?? null,
          5000,
          "A's event in the history",
        );
        await waitFor(
          () => names.every((n) => rx.at(n).some((x) => x.json?.data?.workflow?.id === wf)),
          10_000,
          "A's event delivered to its 100 webhooks",
        );
        // A's 100 pings, answered at once: the ping/resend slots know A's webhooks as fast
        const dash = await dashboardSession(`${svc.url}/dashboard`, a);
        const form = `/${a.org_id}/webhooks/new`;
        const pinged = await Promise.all(hooksA.map((id) => dash.submit(form, `/${a.org_id}/webhooks/${id}/ping`, { from: 'webhook' })));
        for (const p of pinged) expect(p.status).toBe(303);
        expect(names.filter((n) => rx.at(n).some((x) => x.json?.type === 'com.svc.webhook.ping.v1'))).toHaveLength(RESENDERS);
        // then they hang: A's 100 resends are held past the delivery timeout
        for (const n of names) rx.set(n, 'hang');
        rx.resetMaxHeld();
        resends = hooksA.map((id) => dash.submit(form, `/${a.org_id}/webhooks/${id}/resend`, { event_id: ev.id }));
        await waitFor(
          () => rx.held() >= 48,
          10_000,
          () => `A's resends held at its receivers (${rx.held()})`,
        );
        const t0 = Date.now();
        // B's pings: while A's resends are young, and once they have run longer than a fast attempt
        const pings: number[] = [];
        const held: number[] = [];
        for (const at of [0, 700, 1400]) {
          await pause(Math.max(0, t0 + at - Date.now()), "B's pings at set moments of A's resends");
          held.push(rx.held());
          const t = Date.now();
          const ping = await svc.api(b).post(`/v1/orgs/current/webhooks/${hookB}/ping`);
          pings.push(Date.now() - t);
          expect(ping.status, ping.text).toBe(200);
          expect(ping.body).toMatchObject({ delivered: true });
        }
        held.push(rx.maxHeld());
        runs.push({ run, pings, held });
      } finally {
        await rx.close(); // A's held resends fail now, its queued ones fail fast
        for (const r of await Promise.all(resends)) expect(r.status).toBe(303);
      }
    }
    const report = `${mode}: B's ping answered in (ms, at 0 / 0.7 / 1.4 s), beside A's resends held (then, and at most): ${runs
      .map((r) => `#${r.run} ${r.pings.join('/')} (${r.held.join('/')})`)
      .join('; ')}`;
    console.log(report);
    for (const r of runs) {
      expect(r.held[0], report).toBeGreaterThanOrEqual(48);
      expect(max(r.pings), report).toBeLessThanOrEqual(BOUND_MS);
    }
  });

  it(`within one org: the org's fast webhook gets each event within 1 s beside ${FLAPPING} of its own webhooks flapping, in each ` +
    `of ${SAME_ORG_RUNS} runs`, {
    timeout: 60_000 + SAME_ORG_RUNS * 20_000,
  }, async () => {
    const runs: Array<{ run: number; p50: number; max: number; n: number; maxHeld: number; fastAgain: number }> = [];
    for (let run = 0; run < SAME_ORG_RUNS; run++) {
      const a = svc.createOrg(rid('orga'));
      const rx = await startFlappingReceiver();
      try {
        const names = Array.from({ length: FLAPPING }, (_, i) => `a${i}`);
        for (const n of names) rx.set(n, 'flap');
        await createWebhooks(svc.api(a), [...names.map((n) => rx.hook(n)), rx.hook('fast')]);
        const r = await flapRun(rx, a.org_id, a.org_id, 'fast');
        runs.push({ run, p50: p50(r.delays), max: max(r.delays), n: r.delays.length, maxHeld: r.maxHeld, fastAgain: r.fastAgain });
      } finally {
        await rx.close();
      }
      await svc.settled(60_000);
    }
    const report = `${mode}: the fast webhook's delays per run (p50/max ms of n; the org's most held at once, fast in the 2nd cycle): ${runs
      .map((r) => `#${r.run} ${r.p50}/${r.max} of ${r.n} (${r.maxHeld}, ${r.fastAgain})`)
      .join('; ')}`;
    console.log(report);
    for (const r of runs) {
      expect(r.maxHeld, report).toBeGreaterThanOrEqual(200);
      expect(r.fastAgain, report).toBeGreaterThan(0);
      expect(r.max, report).toBeLessThanOrEqual(BOUND_MS);
    }
  });
});
