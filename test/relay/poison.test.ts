// Nothing stuck behind a poison item (CONTRACT 8): an outbox row or a registry entry that the bus
// cannot carry (data planted in the store as it was before the limits) is set aside — a dead
// letter with its reason, counted svc_events_dropped_total{reason="unpublishable"} — and another
// org's events go on being delivered, in NATS mode (real nats-server) and in embedded mode.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../store/db.ts';
import { createOrg } from '../../store/orgs.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { startService, tmpDir, waitFor, type OrgCreds, type TestService } from '../helpers/service.ts';
import { post } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';
import { deadLetters, plantEvent, plantWebhook, unpublishableCount } from '../helpers/poison.ts';
import { MAX_EVENT_BYTES } from '../../src/relay/set-aside.ts';

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

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

describe.skipIf(findNatsServer() === null)('poison items, NATS mode', () => {
  let nats: NatsServerHandle;
  let rcv: Receiver;
  const services: TestService[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    rcv = await startReceiver();
  });
  afterAll(async () => {
    for (const s of services) await s.stop();
    await rcv?.close();
    await nats?.stop();
  });

  it('outbox rows JetStream refuses (a 64k+ route header) or over 256 KiB are set aside; the other org is delivered', async () => {
    let header = '';
    let big = '';
    const { file, b } = store((db, a) => {
      header = plantEvent(db, a, { labels: 330 }); // route header over 64k, event under 256 KiB
      big = plantEvent(db, a, { padBytes: MAX_EVENT_BYTES + 1024 });
    });
    const svc = await startService({ db: file, natsUrl: nats.url });
    services.push(svc);

    await hookAndInstall(svc, b, rcv, 'nats-b');
    await waitFor(() => rcv.at('nats-b').length >= 2, 15_000, "org B's events delivered");
    expect(orgsOf(rcv, 'nats-b')).toEqual(new Set([b.org_id]));

    await waitFor(() => deadLetters(file).length === 2, 5000, 'both poison rows set aside');
    const dead = deadLetters(file);
    expect(dead.map((d) => [d.id, d.kind])).toEqual(
      expect.arrayContaining([
        [header, 'event'],
        [big, 'event'],
      ]),
    );
    const byId = new Map(dead.map((d) => [d.id, d]));
    expect(byId.get(header)!.reason).toMatch(/header size exceeds/i);
    expect(byId.get(big)!.reason).toMatch(/over the 262144-byte limit/);
    expect(JSON.parse(byId.get(big)!.data).body.length).toBeGreaterThan(MAX_EVENT_BYTES); // the event is kept whole
    expect(await unpublishableCount(svc.url)).toBe(2);
    await svc.settled(15_000); // nothing left in the outbox or the stream
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
      expect(await unpublishableCount(svc.url)).toBe(1);
      await svc.settled();
      expect((await svc.events(a.org_id)).map((e: Json) => e.id)).not.toContain(big); // not mirrored on the bus either
    } finally {
      await svc.stop();
    }
  });
});
