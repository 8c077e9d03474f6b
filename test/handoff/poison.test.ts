// Nothing stuck behind a poison item (CONTRACT 8): an outbox row or a registry entry that the bus
// cannot carry (data planted in the store as it was before the limits) is set aside — a dead
// letter with its reason, counted svc_events_dropped_total{reason="unpublishable"} — and another
// org's events go on being delivered, in NATS mode (real nats-server) and in embedded mode.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../store/db.ts';
import { createOrg } from '../../store/orgs.ts';
import { findNatsServer, freePort, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, tmpDir, waitFor, type OrgCreds, type TestService } from '../helpers/service.ts';
import { post } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';
import { deadLetters, plantEvent, plantWebhook, unpublishableCount } from '../helpers/poison.ts';
import { isUnpublishable, MAX_EVENT_BYTES } from '../../src/handoff/set-aside.ts';
import pino from 'pino';
import { connect } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { REGISTRY_BUCKET } from '../../src/bus/nats/jetstream.ts';
import { KvRegistryPublisher } from '../../src/bus/nats/kv-registry.ts';
import { Seal, newDataplaneKey } from '../../src/bus/seal.ts';
import { RegistryReplicator } from '../../src/handoff/registry-replicator.ts';
import { createMetrics } from '../../src/metrics.ts';
import { canonicalMatch } from '../../src/domain/subscription.ts';
import { updateWebhook } from '../../store/webhooks.ts';

type Json = any;

const V1 = { sandbox: { size: 'small' }, components: [{ name: 'api', values: { image: 'api:1' } }] };

/** A fresh database with orgs A and B; `plant` puts A's poison items in before svc starts. */
function store(plant: (db: ReturnType<typeof openDb>, a: string) => void): { file: string; a: OrgCreds; b: OrgCreds } {
  const file = path.join(tmpDir('svc-poison-'), 'svc.db');
  const db = openDb(file);
  try {
    const a = createOrg(db, 'org-a');
    const b = createOrg(db, 'org-b');
    plant(db, a.org.org_id);
    return { file, a: { org_id: a.org.org_id, api_token: a.api_token }, b: { org_id: b.org.org_id, api_token: b.api_token } };
  } finally {
    db.close();
  }
}

/** An all-events webhook of the org at the receiver, then an install (its provision emits events). */
async function hookAndInstall(svc: TestService, org: OrgCreds, rcv: Receiver, hook: string): Promise<void> {
  const api = svc.api(org);
  await post(api, '/v1/orgs/current/webhooks', { webhook_url: rcv.hook(hook) });
  const app = await post(api, '/v1/apps', { name: rid('app') });
  const cfg = await post(api, `/v1/apps/${app.app_id}/configs`, V1);
  await post(api, '/v1/installs', { app_id: app.app_id, name: rid('inst'), app_config_id: cfg.app_config_id });
}

const orgsOf = (rcv: Receiver, hook: string) => new Set(rcv.at(hook).map((r) => (r.json as Json)?.svcorgid));

describe('what cannot be carried', () => {
  it('is an error that names a size; NATS away, no answer or a full stream are waited out', () => {
    for (const e of [
      "'payload' max_payload size exceeded",
      'JetStream refused the event: header size exceeds maximum allowed of 64k',
      'JetStream refused the event: message size exceeds maximum allowed',
      'Maximum Payload Violation',
    ])
      expect(isUnpublishable(new Error(e)), e).toBe(true);
    for (const e of [
      'JetStream did not acknowledge the event within 10000 ms',
      'reconnected to NATS; publishing again',
      'no stream stored the event (503 No Responders Available For Request)',
      'JetStream refused the event: maximum messages exceeded',
      'JetStream refused the event: maximum bytes exceeded',
      'CONNECTION_CLOSED',
      'publisher closed',
    ])
      expect(isUnpublishable(new Error(e)), e).toBe(false);
  });
});

describe.skipIf(findNatsServer() === null)('poison items, NATS mode', () => {
  let nats: NatsServerHandle;
  let rcv: Receiver;
  const services: TestService[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    rcv = await startReceiver();
  });
  // Each test's services stop with it: svc processes on one nats-server are one installation
  // (they share the svc-dispatch consumer, the svc-ingest queue group and svc.jobs.>). A service
  // left running from an earlier test (another database, another data plane key) would take this
  // test's events and drop them as not sealed by its engine, and answer its runners' job reports
  // "unknown org": the workflow of an org stalls.
  afterEach(async () => {
    for (const s of services.splice(0)) await s.stop();
  });
  afterAll(async () => {
    await rcv?.close();
    await nats?.stop();
  });

  it("outbox rows the bus refuses for their size (under 256 KiB, over the server's max_payload) or over 256 KiB are set aside; a 64k+ route travels in its batch; the other org is delivered", async () => {
    // a server that carries less than an event may weigh (CONTRACT 8 allows 256 KiB)
    const dir = tmpDir('svc-poison-nats-');
    const conf = path.join(dir, 'nats.conf');
    fs.writeFileSync(
      conf,
      `listen: 127.0.0.1:${await freePort()}\nmax_payload: 196608\njetstream { store_dir: "${path.join(dir, 'js')}" }\n`,
    );
    const small = await startNatsServer({ config: conf });
    let refused = '';
    let big = '';
    let routeHeavy = '';
    const { file, b } = store((db, a) => {
      refused = plantEvent(db, a, { padBytes: 220_000 }); // under 256 KiB, over this server's max_payload
      big = plantEvent(db, a, { padBytes: MAX_EVENT_BYTES + 1024 });
      // a route over 64 KiB: once a NATS header (refused by JetStream), now inside the batch's body
      routeHeavy = plantEvent(db, a, { labels: 330 });
    });
    try {
      const svc = await startService({ db: file, natsUrl: small.url });
      services.push(svc);

      await hookAndInstall(svc, b, rcv, 'nats-b');
      await waitFor(() => rcv.at('nats-b').length >= 2, 15_000, "org B's events delivered");
      expect(orgsOf(rcv, 'nats-b')).toEqual(new Set([b.org_id]));

      await waitFor(() => deadLetters(file).length === 2, 5000, 'both poison rows set aside');
      const dead = deadLetters(file);
      expect(dead.map((d) => [d.id, d.kind])).toEqual(
        expect.arrayContaining([
          [refused, 'event'],
          [big, 'event'],
        ]),
      );
      expect(dead.map((d) => d.id)).not.toContain(routeHeavy);
      const byId = new Map(dead.map((d) => [d.id, d]));
      expect(byId.get(refused)!.reason).toMatch(/max_payload/i);
      expect(byId.get(big)!.reason).toMatch(/over the 262144-byte limit/);
      expect(JSON.parse(byId.get(big)!.data).body.length).toBeGreaterThan(MAX_EVENT_BYTES); // the event is kept whole
      expect(await unpublishableCount(svc.url)).toBe(2);
      await svc.settled(15_000); // nothing left in the outbox or the stream
    } finally {
      for (const s of services.splice(0)) await s.stop();
      await small.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a webhook whose registry entry is over max_payload is set aside without its secrets; start-up and the other org go on', async () => {
    const secret = 'whsec_poison_secret_do_not_log';
    let poison = '';
    const { file, a, b } = store((db, orgA) => {
      poison = plantWebhook(db, orgA, rcv.hook('reg-a-poison'), 40_000, secret);
    });
    const t0 = Date.now();
    const svc = await startService({ db: file, natsUrl: nats.url });
    services.push(svc);
    expect(Date.now() - t0).toBeLessThan(10_000);

    await waitFor(() => deadLetters(file).some((d) => d.kind === 'registry'), 10_000, 'the registry entry set aside');
    const [dead] = deadLetters(file).filter((d) => d.kind === 'registry');
    expect(dead).toMatchObject({ org_id: a.org_id, item_id: poison });
    expect(dead.reason).toMatch(/max_payload/);
    expect(dead.data).not.toContain(secret);
    expect(JSON.parse(dead.data).match.installs.ids).toHaveLength(40_000);
    expect(await unpublishableCount(svc.url)).toBe(1);

    // org B's webhook (replicated behind the poison one) gets B's events; A's events reach A's other webhook
    await hookAndInstall(svc, b, rcv, 'reg-b');
    await hookAndInstall(svc, a, rcv, 'reg-a');
    await waitFor(() => rcv.at('reg-b').length >= 2 && rcv.at('reg-a').length >= 2, 15_000, "both orgs' events delivered");
    expect(orgsOf(rcv, 'reg-b')).toEqual(new Set([b.org_id]));
    expect(rcv.at('reg-a-poison')).toEqual([]); // the poison webhook has no entry on the data plane

    // a restart with the entry still stored: listening again at once, nothing set aside twice
    await svc.stop();
    const again = await startService({ db: file, natsUrl: nats.url });
    services.push(again);
    expect(deadLetters(file).filter((d) => d.kind === 'registry')).toHaveLength(1);
    expect(await unpublishableCount(again.url)).toBe(0);
  });

  it('a webhook changed to an entry over max_payload is replaced on the replica by a tombstone, and replicated again once it fits', async () => {
    // the layout exists: the services above created it on this server
    const nc = await connect({ servers: nats.url });
    const db = openDb(path.join(tmpDir('svc-poison-kv-'), 'svc.db'));
    try {
      const kv = await new Kvm(jetstream(nc)).open(REGISTRY_BUCKET);
      const seal = new Seal(newDataplaneKey());
      const metrics = createMetrics();
      const orgA = createOrg(db, 'org-a').org.org_id;
      const orgB = createOrg(db, 'org-b').org.org_id;
      const hookA = plantWebhook(db, orgA, 'https://a.example.test/h', 2);
      const hookB = plantWebhook(db, orgB, 'https://b.example.test/h', 2);
      const relay = new RegistryReplicator(db, new KvRegistryPublisher(kv, seal), pino({ level: 'silent' }), metrics);
      await relay.start();
      const replica = () => new KvRegistryPublisher(kv, seal).replicated();
      expect((await replica()).get(`${orgA}.${hookA}`)?.match?.installs?.ids).toHaveLength(2);

      const setIds = (n: number) => {
        const match = { installs: { ids: Array.from({ length: n }, (_, i) => `inst_${String(i).padStart(20, '0')}`) } };
        updateWebhook(db, {
          org_id: orgA,
          webhook_id: hookA,
          secret: 's',
          previous_secret: null,
          previous_secret_expires_at: null,
          interests: { all_events: true },
          match,
          match_canonical: canonicalMatch(match),
        });
        relay.changed(orgA, hookA);
      };
      setIds(40_000);
      await relay.settled();
      const after = await replica();
      expect(after.get(`${orgA}.${hookA}`)).toBeNull(); // a tombstone: no entry with the old match left behind
      expect(after.get(`${orgB}.${hookB}`)?.webhook_id).toBe(hookB); // the other org's entry untouched
      const dropped = (await metrics.registry.getSingleMetric('svc_events_dropped_total')!.get()).values;
      expect(dropped.find((v) => v.labels.reason === 'unpublishable')?.value).toBe(1);

      setIds(3); // fits again
      await relay.settled();
      expect((await replica()).get(`${orgA}.${hookA}`)?.match?.installs?.ids).toHaveLength(3);
      relay.close();
    } finally {
      db.close();
      await nc.close();
    }
  });
});

describe('poison items, embedded mode', () => {
  let rcv: Receiver;
  beforeAll(async () => {
    rcv = await startReceiver();
  });
  afterAll(async () => {
    await rcv?.close();
  });

  it('an event over 256 KiB is set aside; the events behind it, of both orgs, are delivered', async () => {
    let big = '';
    const { file, a, b } = store((db, orgA) => {
      big = plantEvent(db, orgA, { padBytes: MAX_EVENT_BYTES });
    });
    const svc = await startService({ db: file });
    try {
      await hookAndInstall(svc, a, rcv, 'emb-a');
      await hookAndInstall(svc, b, rcv, 'emb-b');
      await waitFor(() => rcv.at('emb-a').length >= 2 && rcv.at('emb-b').length >= 2, 15_000, "both orgs' events delivered");
      expect(rcv.at('emb-a').map((r) => (r.json as Json).id)).not.toContain(big);
      const dead = deadLetters(file);
      expect(dead.map((d) => [d.id, d.kind, d.org_id])).toEqual([[big, 'event', a.org_id]]);
      expect(dead[0].reason).toMatch(/over the 262144-byte limit/);
      // the delivery thread counts it; the count reaches the main thread's metrics after the dead letter is kept
      await waitFor(async () => (await unpublishableCount(svc.url)) === 1, 5000, 'svc_events_dropped_total{reason="unpublishable"} 1');
      await svc.settled();
      expect((await svc.events(a.org_id)).map((e: Json) => e.id)).not.toContain(big); // not mirrored on the bus either
    } finally {
      await svc.stop();
    }
  });
});
