// Ordered delivery per key in NATS mode with several data planes (CONTRACT 10.1: "across kill -9
// and takeovers a key never goes backwards: only the attempt in flight may be repeated"): svc serve
// --no-deliver and two `svc worker`s as child processes, a real nats-server, producers' facts of
// 50 installs × 40 events to a `per_key` webhook (and a plain one beside it) whose receiver answers
// in 0-50 ms at random; each worker is killed with kill -9 once during the run and started again.
// Per key the ordered receiver sees non-decreasing sequences (a repeat only of the last one seen)
// and every one of them; the plain webhook gets every event. And a key whose receiver hangs until the
// 5 s timeout delays the other keys of the webhook by at most 1 s, whichever worker owns them. The throughput of the same setup with
// 1,000 keys is in test/system/ordered-throughput.test.ts (the serial set).
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { children, dataplaneKey, spawnService, spawnWorker, type SvcChild } from '../helpers/child-service.ts';
import { apiClient, newDbWithOrg, waitFor } from '../helpers/service.ts';
import { sendReliably } from '../helpers/producer.ts';
import { fact, keyedReceiver } from '../helpers/ordered.ts';
import { rid } from '../helpers/ids.ts';

const HAVE_NATS = findNatsServer() !== null;

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

async function kill9(c: SvcChild): Promise<void> {
  c.proc.kill('SIGKILL');
  await c.exited;
}

describe.skipIf(!HAVE_NATS)('per_key across kill -9 with two svc workers (NATS mode)', () => {
  let nats: NatsServerHandle | null = null;
  let nc: NatsConnection | null = null;

  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  it('per key: non-decreasing sequences, a repeat only of the last, none missing; the plain webhook gets everything', async () => {
    const INSTALLS = 50;
    const PER = 40;
    const TOTAL = INSTALLS * PER;
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    const rx = await keyedReceiver(() => Math.floor(Math.random() * 51));
    const { db, org } = newDbWithOrg('ordered-workers');
    const svc = await spawnService(db, ['--nats', nats.url, '--no-local-runner', '--no-deliver']);
    const api = apiClient(svc.url, org);
    const created = await api.post('/v1/orgs/current/webhooks', { webhook_url: `${rx.url}/ordered`, delivery: { ordering: 'per_key' } });
    expect(created.status, created.text).toBe(201);
    expect((await api.post('/v1/orgs/current/webhooks', { webhook_url: `${rx.url}/plain` })).status).toBe(201);
    const env = { SVC_DATAPLANE_KEY: dataplaneKey(db) };
    const workers = [await spawnWorker(nats.url, [], env), await spawnWorker(nats.url, [], env)];

    const installs = Array.from({ length: INSTALLS }, () => rid('inst'));
    // every install's facts interleaved, 16 producers at a time
    const facts = Array.from({ length: PER }, () => installs.map((i) => fact(org.org_id, i))).flat();
    let next = 0;
    const lane = async () => {
      while (next < facts.length) {
        const f = facts[next++];
        await sendReliably(nc!, f.subject, f.body);
      }
    };
    const producing = Promise.all(Array.from({ length: 16 }, lane));
    const kills: string[] = [];
    for (const [w, fraction] of [
      [0, 0.25],
      [1, 0.55],
    ] as const) {
      await waitFor(() => rx.distinct('/ordered') >= fraction * TOTAL, 120_000, `${fraction * TOTAL} ordered deliveries`);
      kills.push(`worker ${w + 1} at ${rx.distinct('/ordered')}`);
      await kill9(workers[w]);
      workers[w] = await spawnWorker(nats.url, [], env);
    }
    await producing;
    await waitFor(
      () => rx.distinct('/ordered') >= TOTAL,
      120_000,
      () => `every event at the ordered webhook (have ${rx.distinct('/ordered')})`,
    );
    await waitFor(
      () => rx.distinct('/plain') >= TOTAL,
      60_000,
      () => `every event at the plain webhook (have ${rx.distinct('/plain')})`,
    );

    const byKey = rx.seen.get('/ordered')!;
    let repeats = 0;
    for (const i of installs) {
      const seqs = byKey.get(i) ?? [];
      for (let k = 1; k < seqs.length; k++) {
        // non-decreasing: the same one again (the attempt in flight at a kill) or a later one
        expect(seqs[k], `${i}: ${seqs.join(',')}`).toBeGreaterThanOrEqual(seqs[k - 1]);
        if (seqs[k] === seqs[k - 1]) repeats++;
      }
      expect([...new Set(seqs)], i).toEqual(Array.from({ length: PER }, (_, k) => k + 1));
    }
    console.log(
      `ordered webhook over 2 workers, kill -9 of ${kills.join(' and ')}: ${rx.count('/ordered')} deliveries for ${TOTAL} events ` +
        `(${repeats} repeats of the attempt in flight); plain webhook ${rx.count('/plain')}`,
    );
    for (const w of workers) w.proc.kill('SIGTERM');
    svc.proc.kill('SIGTERM');
    await rx.close();
  }, 300_000);
});

describe.skipIf(!HAVE_NATS)('a hanging key with two svc workers (NATS mode)', () => {
  it('delays the other keys of the webhook by at most 1 s (5 s timeout)', async () => {
    const nats = await startNatsServer();
    const nc = await connect({ servers: nats.url });
    const stuck = rid('inst');
    const rx = await keyedReceiver((ev) => (ev.svcorderkey === stuck ? null : 0));
    try {
      const { db, org } = newDbWithOrg('ordered-hang');
      const svc = await spawnService(db, ['--nats', nats.url, '--no-local-runner', '--no-deliver']);
      const api = apiClient(svc.url, org);
      expect(
        (await api.post('/v1/orgs/current/webhooks', { webhook_url: `${rx.url}/ordered`, delivery: { ordering: 'per_key' } })).status,
      ).toBe(201);
      const env = { SVC_DATAPLANE_KEY: dataplaneKey(db) };
      const workers = [
        await spawnWorker(nats.url, ['--delivery-timeout', '5s'], env),
        await spawnWorker(nats.url, ['--delivery-timeout', '5s'], env),
      ];
      for (let n = 0; n < 2; n++) {
        const f = fact(org.org_id, stuck);
        await sendReliably(nc, f.subject, f.body);
      }
      await waitFor(() => rx.firstAt.has(stuck), 10_000, 'the hanging attempt');
      const delays: number[] = [];
      for (let k = 0; k < 10; k++) {
        const other = rid('inst');
        const f = fact(org.org_id, other);
        const t0 = Date.now();
        await sendReliably(nc, f.subject, f.body);
        await waitFor(() => rx.firstAt.has(other), 5000, `${other} delivered`);
        delays.push(rx.firstAt.get(other)! - t0);
      }
      expect(Math.max(...delays), `delays ${delays.join(', ')} ms`).toBeLessThanOrEqual(1000);
      // the stuck key's second event waits for the first one's outcome (the timeout), then comes
      expect(rx.seen.get('/ordered')!.get(stuck)).toEqual([1]);
      await waitFor(() => rx.seen.get('/ordered')!.get(stuck)!.length === 2, 10_000, "the stuck key's next event after the timeout");
      expect(rx.seen.get('/ordered')!.get(stuck)).toEqual([1, 2]);
      console.log(`other keys beside a hanging one, 2 workers: delivered after ${delays.join(', ')} ms`);
      for (const w of workers) w.proc.kill('SIGTERM');
      svc.proc.kill('SIGTERM');
    } finally {
      for (const c of children) c.kill('SIGKILL');
      await rx.close();
      await nc.close();
      await nats.stop();
    }
  }, 120_000);
});
