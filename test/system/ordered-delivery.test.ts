// Ordered delivery per key (CONTRACT 10.1) end to end, in embedded mode and in NATS mode (one data
// plane): a webhook with `delivery: {ordering: "per_key"}` (create, PATCH, `{}` = null, a PATCH of
// `delivery` alone keeps the subscription) gets each key's events one at a time in sequence order,
// different keys in parallel: a per-key ledger (20 installs x 20 events, a receiver answering in
// 0-50 ms at random) sees per key strictly increasing sequences, none missing, never two of a key
// at once; and a key whose receiver hangs until the 5 s timeout delays the other keys by at most 1 s.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startService, waitFor, type ApiClient, type OrgCreds, type TestService } from '../helpers/service.ts';
import { ingestRequest } from '../helpers/producer.ts';
import { later } from '../helpers/wait.ts';
import { rid } from '../helpers/ids.ts';

type Json = any;

const haveNats = findNatsServer() !== null;

interface Arrival {
  key: string;
  seq: number;
  at: number;
  subject: string;
}

/** A receiver that records each arrival, answers after `delayMs(event)` (null: never), and counts attempts in flight per key. */
async function keyedReceiver(delayMs: (ev: Json) => number | null) {
  const arrivals: Arrival[] = [];
  const inFlight = new Map<string, number>();
  let overlap = 0;
  const hanging = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const ev = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const key = String(ev.svcorderkey);
      arrivals.push({ key, seq: Number(ev.sequence), at: Date.now(), subject: ev.subject });
      const n = (inFlight.get(key) ?? 0) + 1;
      inFlight.set(key, n);
      if (n > 1) overlap++;
      const ms = delayMs(ev);
      if (ms === null) {
        hanging.add(res);
        res.on('close', () => inFlight.set(key, inFlight.get(key)! - 1));
        return;
      }
      later(
        ms,
        () => {
          inFlight.set(key, inFlight.get(key)! - 1);
          res.writeHead(200).end('ok');
        },
        'a receiver that answers in 0-50 ms at random',
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    arrivals,
    overlap: () => overlap,
    close: async () => {
      for (const r of hanging) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

describe.each(['memory', 'nats'] as const)('per_key ordered delivery on the %s bus', (mode) => {
  const skip = mode === 'nats' && !haveNats;
  let nats: NatsServerHandle | null = null;
  let nc: NatsConnection | null = null;
  let svc: TestService;
  let org: OrgCreds;
  let api: ApiClient;

  beforeAll(async () => {
    if (skip) return;
    if (mode === 'nats') nats = await startNatsServer();
    svc = await startService({ natsUrl: nats?.url ?? null, deliveryTimeoutMs: 5000 });
    expect(svc.server.bus.kind).toBe(mode);
    if (nats) nc = await connect({ servers: nats.url });
    org = svc.createOrg(rid('org'));
    api = svc.api(org);
  });

  afterAll(async () => {
    if (skip) return;
    await nc?.drain();
    await svc?.stop();
    await nats?.stop();
  });

  /** An external workflow's `started` of an install (CONTRACT 5.2): one fact, one event keyed by the install. */
  async function produce(install: string): Promise<void> {
    const w = rid('wfx');
    const subject = `svc.ingest.${org.org_id}.workflows.${w}`;
    const body = JSON.stringify({
      kind: 'workflow',
      transition: 'started',
      workflow: { id: w, type: 'manual_deploy', owner_id: install, owner_type: 'installs' },
    });
    const reply = nc
      ? (await ingestRequest(nc, subject, body, { timeout: 5000 })).json<Json>()
      : (await svc.server.bus.request(subject, body, { timeoutMs: 5000 })).json();
    expect(reply.ok, JSON.stringify(reply)).toBe(true);
  }

  it.skipIf(skip)('delivery is set on create and PATCH; {} is null; a PATCH of delivery alone keeps the subscription', async () => {
    const interests = { resources: { installs: { outcome: 'completion' } } };
    const c = await api.post('/v1/orgs/current/webhooks', {
      webhook_url: 'http://127.0.0.1:9/x',
      interests,
      delivery: { ordering: 'per_key' },
    });
    expect(c.status, c.text).toBe(201);
    expect(c.body.delivery).toEqual({ ordering: 'per_key' });
    const id = c.body.webhook_id;
    const off = await api.patch(`/v1/orgs/current/webhooks/${id}`, { delivery: {} });
    expect(off.status, off.text).toBe(200);
    expect(off.body.delivery).toBeNull();
    expect(off.body.interests).toEqual(interests);
    const on = await api.patch(`/v1/orgs/current/webhooks/${id}`, { delivery: { ordering: 'per_key' } });
    expect(on.body.delivery).toEqual({ ordering: 'per_key' });
    expect(on.body.interests).toEqual(interests);
    const bad = await api.patch(`/v1/orgs/current/webhooks/${id}`, { delivery: { ordering: 'global' } });
    expect(bad.status).toBe(400);
    expect((await api.get(`/v1/orgs/current/webhooks/${id}`)).body.delivery).toEqual({ ordering: 'per_key' });
    const plain = await api.post('/v1/orgs/current/webhooks', { webhook_url: 'http://127.0.0.1:9/y', delivery: null });
    expect(plain.body.delivery).toBeNull();
    await api.del(`/v1/orgs/current/webhooks/${id}`);
    await api.del(`/v1/orgs/current/webhooks/${plain.body.webhook_id}`);
  });

  it.skipIf(skip)(
    'a per-key ledger: 20 installs x 20 events, receiver 0-50 ms: per key in order, none missing, one at a time',
    async () => {
      const rx = await keyedReceiver(() => Math.floor(Math.random() * 51));
      const hook = await api.post('/v1/orgs/current/webhooks', { webhook_url: rx.url, delivery: { ordering: 'per_key' } });
      expect(hook.status, hook.text).toBe(201);
      const installs = Array.from({ length: 20 }, () => rid('inst'));
      // the facts of every install interleaved, 20 in parallel at a time
      for (let n = 0; n < 20; n++) await Promise.all(installs.map((i) => produce(i)));
      await waitFor(() => rx.arrivals.length >= 400, 30_000, `400 deliveries (have ${rx.arrivals.length})`);
      await svc.settled();
      expect(rx.arrivals.length).toBe(400);
      for (const i of installs) {
        const seqs = rx.arrivals.filter((a) => a.key === i).map((a) => a.seq);
        expect(seqs, i).toEqual(Array.from({ length: 20 }, (_, k) => k + 1));
      }
      expect(rx.overlap(), 'two attempts of one key at once').toBe(0);
      // keys went in parallel: some key's event arrived between two of another key's
      const order = rx.arrivals.map((a) => a.key);
      expect(new Set(order.slice(0, 40)).size).toBeGreaterThan(1);
      await api.del(`/v1/orgs/current/webhooks/${hook.body.webhook_id}`);
      await rx.close();
    },
  );

  it.skipIf(skip)('a key whose receiver hangs (5 s timeout) delays the other keys of the webhook by at most 1 s', async () => {
    const stuck = rid('inst');
    const rx = await keyedReceiver((ev) => (ev.svcorderkey === stuck ? null : 0));
    const hook = await api.post('/v1/orgs/current/webhooks', { webhook_url: rx.url, delivery: { ordering: 'per_key' } });
    expect(hook.status, hook.text).toBe(201);
    await produce(stuck);
    await produce(stuck);
    await waitFor(() => rx.arrivals.some((a) => a.key === stuck), 5000, 'the hanging attempt');
    const others = Array.from({ length: 10 }, () => rid('inst'));
    const delays: number[] = [];
    for (const i of others) {
      const t0 = Date.now();
      await produce(i);
      await waitFor(() => rx.arrivals.some((a) => a.key === i), 5000, `${i} delivered`);
      delays.push(rx.arrivals.find((a) => a.key === i)!.at - t0);
    }
    expect(Math.max(...delays), `delays ${delays.join(', ')} ms`).toBeLessThanOrEqual(1000);
    // the stuck key's second event waits for the first one's outcome (the timeout), then comes
    expect(rx.arrivals.filter((a) => a.key === stuck).length).toBe(1);
    await waitFor(() => rx.arrivals.filter((a) => a.key === stuck).length === 2, 10_000, "the stuck key's next event after the timeout");
    expect(rx.arrivals.filter((a) => a.key === stuck).map((a) => a.seq)).toEqual([1, 2]);
    await api.del(`/v1/orgs/current/webhooks/${hook.body.webhook_id}`);
    await rx.close();
  });
});
