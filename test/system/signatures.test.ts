// Delivery signatures end to end (CONTRACT 6.4): a real svc (API, rotation with an overlap, ingest,
// engine, bus, dispatch, delivery of an event, and a ping), checked with the stock
// `standardwebhooks` library the way a receiver would. The signing itself: test/delivery/signing.test.ts.
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Received, type Receiver } from '../helpers/receiver.ts';
import { startService, waitFor, type TestService } from '../helpers/service.ts';

const hmacHex = (secret: string, raw: Buffer) => createHmac('sha256', secret).update(raw).digest('hex');
type Headers = Record<string, string>;
const hdrs = (r: Received) => r.headers as Headers;

/** Does the stock library, configured as a receiver would (`whsec_…` as given, else raw), accept this delivery? */
function verifies(secret: string, r: Received): boolean {
  try {
    (secret.startsWith('whsec_') ? new Webhook(secret) : new Webhook(secret, { format: 'raw' })).verify(r.raw, hdrs(r));
    return true;
  } catch {
    return false;
  }
}

// base64 of 24 random-looking bytes: real whsec_ secrets
const WHSEC_NEW = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const WHSEC_OLD = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD';

let rx: Receiver;
beforeAll(async () => {
  rx = await startReceiver();
});
afterAll(async () => {
  await rx.close();
});

describe('end to end: a real svc, a whsec_ secret rotated with an overlap', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService();
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it('an event and a ping after the rotation verify under the new and the old secret; a hard cut signs with the new one only', async () => {
    const org = svc.createOrg('sig-e2e');
    const api = svc.api(org);
    const created = await api.post('/v1/orgs/current/webhooks', { webhook_url: rx.hook('e2e'), secret: WHSEC_OLD });
    expect(created.status, created.text).toBe(201);
    const id = created.body.webhook_id;
    const rotated = await api.patch(`/v1/orgs/current/webhooks/${id}`, { secret: WHSEC_NEW, previous_secret_ttl_s: 3600 });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.previous_secret_expires_at).not.toBeNull();
    expect(rotated.text).not.toContain('whsec_');

    // an event, through ingest, the engine, the bus and dispatch
    const wf = `wfx_sig_${Date.now()}`;
    const answer = await svc.server.bus.request(
      `svc.ingest.${org.org_id}.workflows.${wf}`,
      JSON.stringify({
        kind: 'workflow',
        transition: 'started',
        workflow: { id: wf, type: 'manual_deploy', owner_id: 'inst_x', owner_type: 'installs' },
      }),
      { timeoutMs: 5000 },
    );
    expect(answer.json()).toEqual({ ok: true });
    const event = await waitFor(
      () => rx.at('e2e').find((r) => r.json?.subject === `${org.org_id}/workflow/${wf}/started`),
      10_000,
      'the event',
    );
    // and a ping
    const ping = await api.post(`/v1/orgs/current/webhooks/${id}/ping`);
    expect(ping.body).toMatchObject({ delivered: true, status: 200 });
    const pinged = rx.at('e2e').find((r) => r.json?.type === 'com.svc.webhook.ping.v1')!;
    expect(pinged).toBeDefined();

    for (const rec of [event, pinged]) {
      expect(hdrs(rec)['webhook-id']).toBe(rec.json.id);
      const entries = hdrs(rec)['webhook-signature'].split(' ');
      expect(entries).toHaveLength(2);
      expect(new Webhook(WHSEC_NEW).verify(rec.raw, hdrs(rec))).toEqual(rec.json);
      expect(new Webhook(WHSEC_OLD).verify(rec.raw, hdrs(rec))).toEqual(rec.json);
      expect(new Webhook(WHSEC_NEW).verify(rec.raw, { ...hdrs(rec), 'webhook-signature': entries[0] })).toEqual(rec.json); // new first
      expect(hdrs(rec)['x-svc-signature']).toBe(hmacHex(WHSEC_NEW, rec.raw));
    }

    // a rotation without an overlap: the old secret stops at once
    const cut = await api.patch(`/v1/orgs/current/webhooks/${id}`, { secret: 'plain-third-secret' });
    expect(cut.body.previous_secret_expires_at).toBeNull();
    const before = rx.at('e2e').length;
    expect((await api.post(`/v1/orgs/current/webhooks/${id}/ping`)).body).toMatchObject({ delivered: true });
    const last = rx.at('e2e')[before];
    expect(hdrs(last)['webhook-signature'].split(' ')).toHaveLength(1);
    expect(verifies('plain-third-secret', last)).toBe(true);
    expect(verifies(WHSEC_NEW, last)).toBe(false);
  });
});
