// svc on a 3-server NATS cluster (CONTRACT 1 "NATS clusters", issue 34): a seed list, every stream
// and bucket on 3 replicas (an existing one scaled to 3), a start with one seed down, and the loss
// of the server leading SVC_EVENTS (kill -9, its store deleted) under a backlog: every fact
// acknowledged before is delivered, each one acknowledged after within 10 s of its answer, /readyz
// sampled through the election, and the server rejoins empty and catches up.
import { Writable } from 'node:stream';
import pino from 'pino';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureLayout, EVENTS_STREAM, DISPATCH_CONSUMER, LAYOUT_CONSUMERS, LAYOUT_STREAMS } from '../../src/bus/nats/jetstream.ts';
import { findNatsServer } from '../helpers/nats-server.ts';
import { startNatsCluster, type NatsClusterHandle } from '../helpers/nats-cluster.ts';
import { startService, tmpDir, waitFor, type TestService } from '../helpers/service.ts';
import { createWebhook } from '../helpers/webhooks.ts';
import { pause } from '../helpers/wait.ts';
import {
  childSettled,
  dataplaneKey,
  queuedCount,
  spawnService,
  spawnWorker,
  type ChildService,
  type SvcChild,
} from '../helpers/child-service.ts';
import { apiClient, newDbWithOrg } from '../helpers/service.ts';
import { sendReliably, startedFact } from '../helpers/producer.ts';
import { ledgerLine, ledgerOf, ledgerSeed, prng, startLedgerReceiver, type LedgerReceiver } from '../helpers/ledger.ts';

/** A pino logger whose lines the test reads. */
function capturingLogger(): { logger: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

async function replicasOf(jsm: JetStreamManager, stream: string): Promise<number> {
  return (await jsm.streams.info(stream)).config.num_replicas;
}

/** Every stream of the layout has a leader, as a client sees it. */
async function leadersElected(jsm: JetStreamManager): Promise<boolean> {
  for (const s of LAYOUT_STREAMS) {
    const ok = await jsm.streams.info(s).then(
      (i) => !!i.cluster?.leader,
      () => false,
    );
    if (!ok) return false;
  }
  return true;
}

/**
 * Every stream and consumer of the layout has a leader and two other replicas, each current (with
 * current: false, a leader only): a server lost now leaves a quorum that holds all of it. Just
 * after a scale from one replica to three the new replicas may not be current yet; a server killed
 * then can take the only current copy of a consumer with it, and that consumer elects no leader
 * until the server is back (seen: svc's start timing out on SVC_OUTCOMES/svc-engine for a minute).
 * What was not, the last time it said false: `notReplicated`.
 */
let notReplicated = '';
async function layoutReplicated(jsm: JetStreamManager, opts: { current: boolean } = { current: true }): Promise<boolean> {
  const whole = (c: { leader?: string; replicas?: Array<{ current: boolean; offline?: boolean }> } | undefined) =>
    !!c?.leader && (!opts.current || ((c.replicas?.length ?? 0) === 2 && c.replicas!.every((r) => r.current && !r.offline)));
  const parts: Array<[string, Promise<unknown>]> = [
    ...LAYOUT_STREAMS.map((s): [string, Promise<unknown>] => [
      s,
      jsm.streams.info(s).then(
        (i) => i.cluster,
        (e) => String(e),
      ),
    ]),
    ...LAYOUT_CONSUMERS.map((c): [string, Promise<unknown>] => [
      `${c.stream}/${c.consumer}`,
      jsm.consumers.info(c.stream, c.consumer).then(
        (i) => i.cluster,
        (e) => String(e),
      ),
    ]),
  ];
  for (const [name, p] of parts) {
    const c = await p;
    if (typeof c === 'string' || !whole(c as Parameters<typeof whole>[0])) {
      notReplicated = `${name}: ${JSON.stringify(c)}`;
      return false;
    }
  }
  return true;
}

/**
 * The chaos ledger runs with `npm run test:cluster` (SVC_TEST_CLUSTER_CHAOS=1), not in `npm test`:
 * it passed 21 of 22 runs here, and in the one that failed (a CI run) 63 of 400 acknowledged facts
 * had not arrived 90 s after the last one was produced; the cause is not found yet (issue 34 stays
 * open for it). When it fails it now prints its seed, its kills, where the rest waits, and whether
 * it arrives 60 s later.
 */
const CHAOS = process.env.SVC_TEST_CLUSTER_CHAOS === '1';

describe.skipIf(findNatsServer() === null)('svc on a 3-server NATS cluster', () => {
  let cluster: NatsClusterHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let svc: TestService | null = null;
  const workers: SvcChild[] = [];
  const receivers: LedgerReceiver[] = [];
  const db = `${tmpDir('svc-cluster-')}/svc.db`;

  beforeAll(async () => {
    cluster = await startNatsCluster();
    nc = await connect({ servers: cluster.urls.split(','), name: 'cluster-test' });
    jsm = await jetstreamManager(nc, { timeout: 3000 });
  }, 30_000);
  // a test that fails leaves nothing behind to answer the next one's facts (an in-process svc of
  // another database would refuse them: unknown org)
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      if (w.proc.exitCode === null && w.proc.signalCode === null) w.proc.kill('SIGKILL');
      await w.exited;
    }
    await svc?.stop();
    svc = null;
  });
  afterAll(async () => {
    for (const w of workers) w.proc.kill('SIGKILL');
    await svc?.stop();
    for (const rx of receivers) await rx.close();
    await nc?.close();
    await cluster?.stop();
  });

  it('creates every stream and bucket with 3 replicas, and scales an existing one-replica stream to 3', async () => {
    // an older svc's layout on one server: every stream and bucket with one replica
    await ensureLayout(nc, jsm, { replicas: 1 });
    expect(await replicasOf(jsm, EVENTS_STREAM)).toBe(1);

    const { logger, lines } = capturingLogger();
    svc = await startService({ natsUrl: cluster.urls, db }, { logger }).catch((err) => {
      console.log(lines.join(''));
      throw err;
    });
    for (const s of LAYOUT_STREAMS) expect(await replicasOf(jsm, s), s).toBe(3);
    // the consumer the data planes share follows its stream
    await waitFor(
      async () => ((await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER).catch(() => null))?.cluster?.replicas?.length ?? 0) === 2,
      30_000,
      'the dispatch consumer on 3 servers',
    ).catch(async (err) => {
      const ci = await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER).catch((e) => String(e));
      console.log('dispatch consumer:', JSON.stringify(ci), lines.join(''));
      throw err;
    });
    expect(lines.some((l) => l.includes(`scaled JetStream stream ${EVENTS_STREAM} from 1 to 3 replicas`))).toBe(true);
    expect(lines.some((l) => l.includes('JetStream layout in place: 3 replicas'))).toBe(true);
    expect((await fetch(`${svc.url}/readyz`)).status).toBe(200);
    await svc.stop();
    svc = null;
  }, 60_000);

  it('starts and is ready with one of three seeds down', async () => {
    await waitFor(
      () => layoutReplicated(jsm),
      30_000,
      () => `every stream and consumer on 3 servers, each replica current (${notReplicated})`,
    );
    const down = cluster.servers[0];
    await cluster.kill(down.name);
    // the streams it led have new leaders (a start during the election is the next test's matter)
    await waitFor(() => leadersElected(jsm), 30_000, 'a leader for every stream');
    // the dead server first in the list: the client goes on to the next seed
    const seeds = [down.url, ...cluster.servers.slice(1).map((s) => s.url)].join(',');
    const { logger, lines } = capturingLogger();
    try {
      svc = await startService({ natsUrl: seeds, db }, { logger }).catch((err) => {
        // what svc saw while it set up (which request timed out, and for how long)
        console.log(lines.join(''));
        throw err;
      });
      const waits = lines.filter((l) => l.includes('JetStream did not answer'));
      if (waits.length) console.log(`svc waited for JetStream as it started:\n${waits.join('')}`);
      // ready once every stream and consumer it needs has a leader (a consumer may still be electing one)
      const url = svc.url;
      await waitFor(async () => (await fetch(`${url}/readyz`)).status === 200, 20_000, '/readyz 200');
      await svc.stop();
      svc = null;
    } finally {
      // the next test needs all three, and a leader for every stream and consumer (not every
      // replica current: a consumer nothing uses was seen to keep the restarted server's replica at
      // a lag of 1 for a minute, without harm to it)
      await cluster.restart(down.name);
      await waitFor(
        () => layoutReplicated(jsm, { current: false }),
        60_000,
        () => `a leader for every stream and consumer (${notReplicated})`,
      );
    }
  }, 180_000);

  it('loses no acknowledged fact when the server leading SVC_EVENTS is killed and its store deleted, and delivers within 10 s ' +
    'after (two svc workers)', async () => {
    // the engine here delivers nothing: two `svc worker --nats <the seed list>` processes do
    svc = await startService({ natsUrl: cluster.urls, db, deliver: false });
    const key = dataplaneKey(db);
    workers.push(...(await Promise.all([0, 1].map(() => spawnWorker(cluster.urls, [], { SVC_DATAPLANE_KEY: key })))));
    const slow = await startLedgerReceiver({ delayMs: 300 });
    const fast = await startLedgerReceiver();
    receivers.push(slow, fast);
    const orgA = svc.createOrg('backlog');
    const orgB = svc.createOrg('after');
    await createWebhook(svc.api(orgA), `${slow.url}/a`);
    await createWebhook(svc.api(orgB), `${fast.url}/b`);

    // a backlog: org A's facts faster than its slow webhook takes them
    const BEFORE = 120;
    const ackedBefore: string[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (ackedBefore.length < BEFORE) {
          const f = startedFact(orgA.org_id);
          ackedBefore.push(f.subject);
          await sendReliably(nc, f.natsSubject, f.body);
        }
      }),
    );
    const ackedBeforeSet = ackedBefore.slice(0, BEFORE);
    const info = await jsm.streams.info(EVENTS_STREAM);
    const leader = info.cluster!.leader!;
    const backlog = BEFORE - slow.distinct('/a');
    expect(backlog, 'a backlog when the leader is killed').toBeGreaterThan(20);

    // /readyz sampled every 100 ms from the kill until the facts acknowledged after are delivered
    const samples: Array<{ at: number; status: number; reasons?: string[] }> = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const r = await fetch(`${svc!.url}/readyz`).catch(() => null);
        if (r)
          samples.push({
            at: Date.now(),
            status: r.status,
            reasons: r.status === 200 ? undefined : ((await r.json()) as { reasons: string[] }).reasons,
          });
        await pause(100, '/readyz sampled every 100 ms: a sampling interval');
      }
    })();

    const killedAt = Date.now();
    await cluster.kill(leader, { wipe: true });

    // org B's facts, one every 200 ms from the kill on: each is answered, then delivered within 10 s
    const AFTER = 30;
    const answeredAt = new Map<string, number>();
    for (let i = 0; i < AFTER; i++) {
      const f = startedFact(orgB.org_id);
      await sendReliably(nc, f.natsSubject, f.body);
      answeredAt.set(f.subject, Date.now());
      await pause(200, "B's facts paced on the wall clock, one every 200 ms from the kill on");
    }
    await waitFor(() => fast.distinct('/b') === AFTER, 30_000, 'every fact acknowledged after the kill delivered').catch((err) => {
      for (const w of workers) console.log(w.output());
      throw err;
    });
    sampling = false;
    await sampler;

    // the server comes back with an empty store, rejoins and catches up
    await cluster.restart(leader);
    await waitFor(
      async () => {
        const replicas = (await jsm.streams.info(EVENTS_STREAM).catch(() => null))?.cluster;
        const all = [replicas?.leader, ...(replicas?.replicas ?? []).filter((p) => p.current).map((p) => p.name)];
        return all.includes(leader);
      },
      30_000,
      `${leader} to rejoin ${EVENTS_STREAM} and catch up`,
    );

    await waitFor(() => slow.distinct('/a') === BEFORE, 60_000, 'the backlog delivered');
    // the outcomes came back to the engine through the election too (SVC_OUTCOMES, its consumer)
    await waitFor(
      async () => ((await svc!.api(orgB).get('/v1/orgs/current/webhooks')).body[0]?.delivery_status?.attempts_total ?? 0) >= AFTER,
      30_000,
      "org B's delivery status to count every attempt",
    );
    await svc.settled(30_000).catch(async (err) => {
      // what the servers say, or why they cannot say it (a consumer electing its leader)
      const si = await jsm.streams.info(EVENTS_STREAM).then((i) => ({ state: i.state, cluster: i.cluster }), String);
      const ci = await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER).then((i) => ({ ...i, config: undefined }), String);
      console.log('not settled:', JSON.stringify(si), JSON.stringify(ci));
      for (const w of workers) console.log(w.output());
      throw err;
    });

    const a = ledgerOf(ackedBeforeSet, slow.deliveries, '/a');
    const b = ledgerOf(answeredAt.keys(), fast.deliveries, '/b');
    const latencies = [...answeredAt].map(
      ([subject, at]) => fast.deliveries.find((d) => d.path === '/b' && d.subject === subject)!.at - at,
    );
    const notReady = samples.filter((s) => s.status !== 200);
    const firstAfter = [...answeredAt].map(([subject]) => fast.deliveries.find((d) => d.subject === subject)!.at).sort((x, y) => x - y)[0];
    console.log(ledgerLine('cluster backlog (acknowledged before the kill)', a, `backlog ${backlog} at the kill of ${leader}`));
    console.log(
      ledgerLine(
        'cluster after (acknowledged after the kill)',
        b,
        `delivery after its answer: max ${Math.max(...latencies)} ms, ` +
          `median ${latencies.sort((x, y) => x - y)[Math.floor(latencies.length / 2)]} ms; ` +
          `first delivery ${firstAfter - killedAt} ms after the kill`,
      ),
    );
    console.log(
      `/readyz during the election: ${samples.length} samples, ${notReady.length} not ready` +
        (notReady.length
          ? ` (from ${notReady[0].at - killedAt} ms to ${notReady[notReady.length - 1].at - killedAt} ms after the kill: ` +
            `${[...new Set(notReady.flatMap((s) => s.reasons ?? []))].join(' | ')})`
          : ''),
    );
    expect(a.missing, 'acknowledged before the kill, never delivered').toEqual([]);
    expect(b.missing, 'acknowledged after the kill, never delivered').toEqual([]);
    expect(a.foreignRepeats).toEqual([]);
    expect(b.foreignRepeats).toEqual([]);
    expect(Math.max(...latencies)).toBeLessThanOrEqual(10_000);
    // ready again once every stream has its leader
    await waitFor(async () => (await fetch(`${svc!.url}/readyz`)).status === 200, 10_000, '/readyz 200 again');
    // this test's workers would take (and drop: another data plane key) the next test's events
    for (const w of workers.splice(0)) {
      w.proc.kill('SIGTERM');
      await w.exited;
    }
    await svc.stop();
    svc = null;
  }, 150_000);

  it.runIf(CHAOS)(
    'chaos: kill -9 of a cluster server, a worker and the engine at random moments under a backlog: 0 missing',
    async () => {
      const seed = ledgerSeed();
      const random = prng(seed);
      const rx = await startLedgerReceiver({ delayMs: 200 });
      receivers.push(rx);
      const { db: chaosDb, org } = newDbWithOrg('cluster-chaos');
      const args = ['--nats', cluster.urls, '--no-local-runner', '--no-deliver'];
      const procs: SvcChild[] = [];
      const track = <T extends SvcChild>(c: T): T => {
        procs.push(c);
        workers.push(c); // killed in afterAll if still running
        return c;
      };
      let engine: ChildService = track(await spawnService(chaosDb, args));
      await createWebhook(apiClient(engine.url, org), `${rx.url}/c`);
      const key = dataplaneKey(chaosDb);
      const startWorker = async () => track(await spawnWorker(cluster.urls, [], { SVC_DATAPLANE_KEY: key }));
      const pool = [await startWorker(), await startWorker()];
      const kill9 = async (c: SvcChild) => {
        c.proc.kill('SIGKILL');
        await c.exited;
      };

      const N = 400;
      const acked: string[] = [];
      const delivered = () => rx.distinct('/c');
      let next = 0;
      const producing = Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < N) {
            next++;
            await waitFor(() => acked.length - delivered() < 120, 120_000, 'room in the backlog');
            const f = startedFact(org.org_id);
            await sendReliably(nc, f.natsSubject, f.body);
            acked.push(f.subject);
          }
        }),
      );
      // one kill each, in a random order, at random moments between 15% and 75% of the work
      const kinds = ['server', 'worker', 'engine'].sort(() => random() - 0.5);
      const at: string[] = [];
      let from = 0.15;
      for (const [i, kind] of kinds.entries()) {
        const f = from + random() * (0.75 - from - 0.15 * (kinds.length - 1 - i));
        from = f + 0.15;
        await waitFor(() => delivered() >= Math.ceil(f * N), 90_000, `${Math.ceil(f * N)} deliveries before killing a ${kind}`);
        if (kind === 'server') {
          const victim = cluster.servers[Math.floor(random() * cluster.servers.length)].name;
          await cluster.kill(victim, { wipe: true });
          at.push(`server ${victim} (store deleted) at ${delivered()}`);
          // it comes back empty once the other two have taken over
          await waitFor(() => leadersElected(jsm), 30_000, 'a leader for every stream');
          await cluster.restart(victim);
        } else if (kind === 'worker') {
          const w = pool.shift()!;
          await kill9(w);
          at.push(`a worker at ${delivered()}`);
          pool.push(await startWorker());
        } else {
          await kill9(engine);
          at.push(`the engine at ${delivered()}`);
          engine = track(await spawnService(chaosDb, args));
        }
      }
      await producing;
      await waitFor(() => delivered() >= N, 90_000, `all ${N} acknowledged facts delivered`).catch(async (err) => {
        // what a failure needs to be replayed and understood: the seed, the kills, where the rest waits
        const si = await jsm.streams.info(EVENTS_STREAM).catch((e) => String(e));
        const ci = await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER).catch((e) => String(e));
        console.log(
          `cluster chaos: ${delivered()} of ${N} delivered; seed ${seed} (LEDGER_SEED=${seed}); kills: ${at.join(', ')}; outbox ` +
            `rows ${queuedCount(chaosDb)}`,
        );
        console.log('stream', JSON.stringify(si), '\nconsumer', JSON.stringify(ci));
        for (const p of procs)
          console.log(
            p
              .output()
              .split('\n')
              .filter((l) => /"level":(40|50|60)/.test(l))
              .slice(-15)
              .join('\n'),
          );
        // a stall or a loss: does the rest arrive later?
        await waitFor(() => delivered() >= N, 60_000, 'the rest').catch(() => undefined);
        console.log(`cluster chaos: 60 s later ${delivered()} of ${N} delivered`);
        throw err;
      });
      // nothing left queued: a repeat of what the killed worker held would have arrived by now
      await childSettled(chaosDb, { jsm, timeoutMs: 60_000 });
      const l = ledgerOf(acked, rx.deliveries, '/c');
      console.log(ledgerLine('cluster chaos', l, `seed ${seed} (LEDGER_SEED=${seed} replays it); kills: ${at.join(', ')}`));
      expect(l.acknowledged).toBe(N);
      expect(l.missing, 'acknowledged, never delivered').toEqual([]);
      expect(l.unexpected).toEqual([]);
      expect(l.foreignRepeats, 'a repeat that is not the same attempt again').toEqual([]);
      for (const p of procs) if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill('SIGKILL');
    },
    150_000,
  );
});
