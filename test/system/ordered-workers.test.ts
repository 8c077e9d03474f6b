// Ordered delivery per key in NATS mode with several data planes (CONTRACT 10.1: "across kill -9
// and takeovers a key never goes backwards: only the attempt in flight may be repeated"): svc serve
// --no-deliver and two `svc worker`s as child processes, a real nats-server, producers' facts of
// 50 installs × 40 events to a `per_key` webhook (and a plain one beside it) whose receiver answers
// in 0-50 ms at random; each worker is killed with kill -9 once during the run and started again.
// Per key the ordered receiver sees non-decreasing sequences (a repeat only of the last one seen)
// and every one of them; the plain webhook gets every event. A second test prints the throughput of
// an ordered webhook against an unordered one with 1,000 active keys, same run, two workers (the
// figure issue 53 asks for; no timed assert).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, describe, expect, it } from 'vitest';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { children, dataplaneKey, spawnService, spawnWorker, type SvcChild } from '../helpers/child-service.ts';
import { apiClient, newDbWithOrg, waitFor } from '../helpers/service.ts';
import { sendReliably } from '../helpers/producer.ts';
import { later } from '../helpers/wait.ts';
import { rid } from '../helpers/ids.ts';

const HAVE_NATS = findNatsServer() !== null;

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** Per path, per key: the sequences in the order they arrived; answers after `delayMs()`. */
async function keyedReceiver(delayMs: () => number) {
  const seen = new Map<string, Map<string, number[]>>();
  const count = new Map<string, number>();
  const last = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '';
      const ev = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      let byKey = seen.get(path);
      if (!byKey) seen.set(path, (byKey = new Map()));
      const list = byKey.get(ev.svcorderkey) ?? [];
      list.push(Number(ev.sequence));
      byKey.set(ev.svcorderkey, list);
      count.set(path, (count.get(path) ?? 0) + 1);
      last.set(path, Date.now());
      later(delayMs(), () => res.writeHead(200).end(), 'a receiver that answers after a while');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    count: (path: string) => count.get(path) ?? 0,
    last: (path: string) => last.get(path) ?? 0,
    /** distinct (key, sequence) pairs seen at a path */
    distinct: (path: string) => [...(seen.get(path)?.values() ?? [])].reduce((n, l) => n + new Set(l).size, 0),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** An external workflow's `started` of an install: one fact, one event keyed by the install. */
function fact(org: string, install: string) {
  const w = rid('wfx');
  return {
    subject: `svc.ingest.${org}.workflows.${w}`,
    body: {
      kind: 'workflow',
      transition: 'started',
      workflow: { id: w, type: 'manual_deploy', owner_id: install, owner_type: 'installs' },
    },
  };
}

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

describe.skipIf(!HAVE_NATS)('per_key throughput with 1,000 keys (NATS mode, two svc workers)', () => {
  it('prints the ordered webhook rate against the unordered one, same run', async () => {
    const KEYS = 1000;
    const PER = 3;
    const nats = await startNatsServer();
    const nc = await connect({ servers: nats.url });
    const rx = await keyedReceiver(() => 30);
    try {
      const { db, org } = newDbWithOrg('ordered-bench');
      const svc = await spawnService(db, ['--nats', nats.url, '--no-local-runner', '--no-deliver']);
      const api = apiClient(svc.url, org);
      await api.post('/v1/orgs/current/webhooks', { webhook_url: `${rx.url}/ordered`, delivery: { ordering: 'per_key' } });
      await api.post('/v1/orgs/current/webhooks', { webhook_url: `${rx.url}/plain` });
      const env = { SVC_DATAPLANE_KEY: dataplaneKey(db) };
      const workers = [await spawnWorker(nats.url, [], env), await spawnWorker(nats.url, [], env)];
      // both workers hold their share of the partitions before the run (a plane counts the others every few seconds)
      await new Promise((r) => setTimeout(r, 8000));
      const installs = Array.from({ length: KEYS }, () => rid('inst'));
      const facts = Array.from({ length: PER }, () => installs.map((i) => fact(org.org_id, i))).flat();
      const t0 = Date.now();
      let next = 0;
      const lane = async () => {
        while (next < facts.length) {
          const f = facts[next++];
          await sendReliably(nc, f.subject, f.body);
        }
      };
      await Promise.all(Array.from({ length: 32 }, lane));
      const total = KEYS * PER;
      await waitFor(
        () => rx.distinct('/ordered') >= total && rx.distinct('/plain') >= total,
        180_000,
        () => 'every event at both',
      );
      const rate = (p: string) => rx.count(p) / ((rx.last(p) - t0) / 1000);
      const ordered = rate('/ordered');
      const plain = rate('/plain');
      console.log(
        `throughput with ${KEYS} keys, 2 workers, receiver 30 ms: ordered ${ordered.toFixed(0)}/s, unordered ${plain.toFixed(0)}/s, ` +
          `ratio ${(ordered / plain).toFixed(2)}`,
      );
      for (const w of workers) w.proc.kill('SIGTERM');
      svc.proc.kill('SIGTERM');
    } finally {
      await rx.close();
      await nc.close();
      await nats.stop();
    }
  }, 300_000);
});
