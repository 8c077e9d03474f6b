// Throughput of ordered delivery (CONTRACT 10.1): with 1,000 active keys, a `per_key` webhook
// delivers at least 0.8 of what an unordered one does on the same machine. Both webhooks get the
// same 3,000 events (1,000 installs x 3) in the same run from one embedded svc, to a receiver that
// answers in 30 ms (so that delivery, 8 in flight per webhook, not the producer, is what limits
// them: about 266/s each); each one's rate is its deliveries over the time from the first fact to its last
// delivery. The figures are printed (the bench of issue 53). The same in NATS mode with svc serve
// --no-deliver and two `svc worker`s (ordered webhooks' keys spread over the planes by partition
// leases, src/dataplane/sources/jetstream/ordered-source.ts).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, waitFor, type TestService } from '../helpers/service.ts';
import { later } from '../helpers/wait.ts';
import { rid } from '../helpers/ids.ts';
import { connect } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { ORDERED_LEASES_BUCKET, ORDERED_PARTITIONS } from '../../src/bus/nats/jetstream.ts';
import { findNatsServer, startNatsServer } from '../helpers/nats-server.ts';
import { children, dataplaneKey, spawnService, spawnWorker } from '../helpers/child-service.ts';
import { apiClient, newDbWithOrg } from '../helpers/service.ts';
import { sendReliably } from '../helpers/producer.ts';
import { fact, keyedReceiver } from '../helpers/ordered.ts';

const HAVE_NATS = findNatsServer() !== null;

type Json = any;

describe('per_key throughput with 1,000 keys', () => {
  let svc: TestService;
  let server: http.Server;
  let url: string;
  const last = new Map<string, number>();
  const count = new Map<string, number>();

  beforeAll(async () => {
    svc = await startService();
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const p = req.url ?? '';
        count.set(p, (count.get(p) ?? 0) + 1);
        last.set(p, Date.now());
        later(30, () => res.writeHead(200).end(), 'a receiver that answers in 30 ms');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await svc?.stop();
    server?.closeAllConnections();
    await new Promise<void>((r) => server?.close(() => r()));
  });

  it('ordered delivers at least 0.8 of the unordered rate', async () => {
    const org = svc.createOrg(rid('org'));
    const api = svc.api(org);
    expect((await api.post('/v1/orgs/current/webhooks', { webhook_url: `${url}/ordered`, delivery: { ordering: 'per_key' } })).status).toBe(
      201,
    );
    expect((await api.post('/v1/orgs/current/webhooks', { webhook_url: `${url}/plain` })).status).toBe(201);
    const installs = Array.from({ length: 1000 }, () => rid('inst'));
    const t0 = Date.now();
    for (let n = 0; n < 3; n++) {
      for (let i = 0; i < installs.length; i += 200) {
        await Promise.all(
          installs.slice(i, i + 200).map(async (install) => {
            const w = rid('wfx');
            const body = {
              kind: 'workflow',
              transition: 'started',
              workflow: { id: w, type: 'manual_deploy', owner_id: install, owner_type: 'installs' },
            };
            const m = await svc.server.bus.request(`svc.ingest.${org.org_id}.workflows.${w}`, JSON.stringify(body), { timeoutMs: 10_000 });
            expect((m.json() as Json).ok).toBe(true);
          }),
        );
      }
    }
    await waitFor(() => count.get('/ordered') === 3000 && count.get('/plain') === 3000, 120_000, 'every delivery');
    const rate = (p: string) => 3000 / ((last.get(p)! - t0) / 1000);
    const ordered = rate('/ordered');
    const plain = rate('/plain');
    console.log(`per_key ${ordered.toFixed(0)} del/s, unordered ${plain.toFixed(0)} del/s, ratio ${(ordered / plain).toFixed(2)}`);
    expect(ordered / plain).toBeGreaterThanOrEqual(0.8);
  });
});

describe.skipIf(!HAVE_NATS)('per_key throughput with 1,000 keys, NATS mode, two svc workers', () => {
  it('ordered delivers at least 0.8 of the unordered rate', async () => {
    const KEYS = 1000;
    const PER = 3;
    const nats = await startNatsServer();
    const nc = await connect({ servers: nats.url });
    // 60 ms: 2 workers x 8 in flight make at most ~266/s a webhook, well below what the producers send
    const rx = await keyedReceiver(() => 60);
    try {
      const { db, org } = newDbWithOrg('ordered-bench');
      const svc = await spawnService(db, ['--nats', nats.url, '--no-local-runner', '--no-deliver']);
      const api = apiClient(svc.url, org);
      await api.post('/v1/orgs/current/webhooks', { webhook_url: `${rx.url}/ordered`, delivery: { ordering: 'per_key' } });
      await api.post('/v1/orgs/current/webhooks', { webhook_url: `${rx.url}/plain` });
      const env = { SVC_DATAPLANE_KEY: dataplaneKey(db) };
      const workers = [await spawnWorker(nats.url, [], env), await spawnWorker(nats.url, [], env)];
      // both workers hold their share of the partitions before the run (a plane counts the others every few rounds)
      const leases = await new Kvm(jetstream(nc)).open(ORDERED_LEASES_BUCKET);
      await waitFor(
        async () => {
          const holders = new Map<string, number>();
          for (let p = 0; p < ORDERED_PARTITIONS; p++) {
            const e = await leases.get(`p${p}`);
            if (e?.operation === 'PUT') holders.set(e.string(), (holders.get(e.string()) ?? 0) + 1);
          }
          return holders.size === 2 && [...holders.values()].every((n) => n === ORDERED_PARTITIONS / 2);
        },
        30_000,
        'each worker owning half the ordered partitions',
        200,
      );
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
        `NATS mode, ${KEYS} keys, 2 workers, receiver 60 ms: per_key ${ordered.toFixed(0)}/s, unordered ${plain.toFixed(0)}/s, ` +
          `ratio ${(ordered / plain).toFixed(2)}`,
      );
      expect(ordered / plain).toBeGreaterThanOrEqual(0.8);
      for (const w of workers) w.proc.kill('SIGTERM');
      svc.proc.kill('SIGTERM');
    } finally {
      for (const c of children) c.kill('SIGKILL');
      await rx.close();
      await nc.close();
      await nats.stop();
    }
  }, 300_000);
});
