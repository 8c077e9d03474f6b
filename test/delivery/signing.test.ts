// Delivery signatures (CONTRACT 6.4, src/delivery/signing.ts): X-Svc-Signature and the Standard Webhooks headers, checked
// with the stock `standardwebhooks` library the way a receiver would, through the real Deliverer
// to a real HTTP receiver with an injected clock. End to end through a real svc:
// test/system/signatures.test.ts.
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { testDeliverer, type TestDeliverer } from '../helpers/deliverer.ts';
import {
  checkDelivery,
  RECOVERY_HEADER,
  SIGNATURE_HEADER,
  SVC_SIGNATURE_HEADER,
  signatureHeaders,
  signingKeys,
  standardWebhooksKey,
  TIMESTAMP_TOLERANCE_S,
  WEBHOOK_ID_HEADER,
  WEBHOOK_SIGNATURE_HEADER,
  WEBHOOK_TIMESTAMP_HEADER,
  type WebhookSecrets,
} from '../../src/delivery/signing.ts';
import { ManualClock } from '../helpers/clock.ts';
import { startReceiver, type Received, type Receiver } from '../helpers/receiver.ts';

const hmacHex = (secret: string, raw: Buffer) => createHmac('sha256', secret).update(raw).digest('hex');
type Headers = Record<string, string>;
const hdrs = (r: Received) => r.headers as Headers;

/** The stock library as a receiver configures it: `whsec_…` as given, else `{format: 'raw'}`. */
function stock(secret: string): Webhook {
  return secret.startsWith('whsec_') ? new Webhook(secret) : new Webhook(secret, { format: 'raw' });
}
/** Does the stock library accept this delivery under this secret? */
function verifies(secret: string, r: Received): boolean {
  try {
    stock(secret).verify(r.raw, hdrs(r));
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

describe('signatureHeaders through the Deliverer (injected clock)', () => {
  const made: TestDeliverer[] = [];
  afterEach(async () => {
    await Promise.all(made.splice(0).map((d) => d.close(0)));
  });
  // the stock library checks webhook-timestamp against the real clock: start there
  const clock = new ManualClock(Date.now());
  function deliverer() {
    const d = testDeliverer({ timeoutMs: 5000, allowPrivateTargets: true, clock });
    made.push(d);
    return d;
  }
  let n = 0;
  /** Deliver one event with these secrets; the request as the receiver got it. */
  async function deliver(secrets: WebhookSecrets): Promise<{ rec: Received; id: string; body: string }> {
    const id = `evt_${++n}_${Date.now()}`;
    const body = JSON.stringify({ specversion: '1.0', id, type: 'com.svc.webhook.ping.v1', data: { note: 'héllo ✓ — ünïcödé' } });
    const hook = `sig-${n}`;
    const r = await deliverer().deliver({ url: rx.hook(hook), secret: signingKeys(secrets) }, body, { eventId: id });
    expect(r).toMatchObject({ delivered: true, status: 200 });
    const [rec] = rx.at(hook);
    expect(rec.raw.toString('utf8')).toBe(body);
    return { rec, id, body };
  }

  it(
    'a plain secret: webhook-id, webhook-timestamp of this attempt, ' +
      'a v1 signature the stock library verifies ({format: raw}), X-Svc-Signature',
    async () => {
      const secret = 'a plain shared secret';
      const { rec, id, body } = await deliver({ secret });
      const h = hdrs(rec);
      expect(h['webhook-id']).toBe(id);
      expect(h['webhook-timestamp']).toBe(String(Math.floor(clock.now() / 1000)));
      expect(h['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(stock(secret).verify(rec.raw, h)).toEqual(JSON.parse(body));
      expect(verifies('another secret', rec)).toBe(false);
      expect(h['x-svc-signature']).toBe(hmacHex(secret, rec.raw));
    },
  );

  it(
    'a whsec_ secret: keyed with the bytes it encodes (the stock library as given), ' + 'X-Svc-Signature keyed with the whole string',
    async () => {
      const { rec, body } = await deliver({ secret: WHSEC_NEW });
      expect(new Webhook(WHSEC_NEW).verify(rec.raw, hdrs(rec))).toEqual(JSON.parse(body));
      // not the raw string's bytes
      expect(() => new Webhook(WHSEC_NEW, { format: 'raw' }).verify(rec.raw, hdrs(rec))).toThrow(/signature/i);
      expect(hdrs(rec)['x-svc-signature']).toBe(hmacHex(WHSEC_NEW, rec.raw));
    },
  );

  it('during an overlap both secrets sign, new first, each verifying alone; after it (clock advanced) only the new one', async () => {
    for (const [current, previous] of [
      [WHSEC_NEW, WHSEC_OLD],
      ['new plain secret', WHSEC_OLD],
      [WHSEC_NEW, 'old plain secret'],
    ]) {
      const secrets = {
        secret: current,
        previous_secret: previous,
        previous_secret_expires_at: new Date(clock.now() + 60_000).toISOString(),
      };
      const during = await deliver(secrets);
      const h = hdrs(during.rec);
      const entries = h['webhook-signature'].split(' ');
      expect(entries).toHaveLength(2);
      const date = new Date(Number(h['webhook-timestamp']) * 1000);
      expect(entries[0]).toBe(stock(current).sign(during.id, date, during.rec.raw));
      expect(entries[1]).toBe(stock(previous).sign(during.id, date, during.rec.raw));
      expect(verifies(current, during.rec)).toBe(true);
      expect(verifies(previous, during.rec)).toBe(true);
      // each alone: a header listing only one of them
      for (const [i, s] of [current, previous].entries()) {
        const alone = { ...during.rec, headers: { ...h, 'webhook-signature': entries[i] } };
        expect(verifies(s, alone)).toBe(true);
        expect(verifies(i === 0 ? previous : current, alone)).toBe(false);
      }
      // X-Svc-Signature: the current secret only
      expect(h['x-svc-signature']).toBe(hmacHex(current, during.rec.raw));

      clock.advance(60_000); // the overlap ends exactly now: the expiry is exclusive
      const after = await deliver(secrets);
      expect(hdrs(after.rec)['webhook-signature'].split(' ')).toHaveLength(1);
      expect(verifies(current, after.rec)).toBe(true);
      expect(verifies(previous, after.rec)).toBe(false);
      expect(hdrs(after.rec)['x-svc-signature']).toBe(hmacHex(current, after.rec.raw));
      expect(Number(hdrs(after.rec)['webhook-timestamp'])).toBe(Math.floor(clock.now() / 1000));
    }
  });

  it('an expired or absent previous secret does not sign; a previous equal to the current one signs once', async () => {
    const past = await deliver({
      secret: WHSEC_NEW,
      previous_secret: WHSEC_OLD,
      previous_secret_expires_at: new Date(clock.now() - 1).toISOString(),
    });
    expect(hdrs(past.rec)['webhook-signature'].split(' ')).toHaveLength(1);
    expect(verifies(WHSEC_OLD, past.rec)).toBe(false);
    const same = await deliver({
      secret: WHSEC_NEW,
      previous_secret: WHSEC_NEW,
      previous_secret_expires_at: new Date(clock.now() + 60_000).toISOString(),
    });
    expect(hdrs(same.rec)['webhook-signature'].split(' ')).toHaveLength(1);
    const noExpiry = await deliver({ secret: WHSEC_NEW, previous_secret: WHSEC_OLD, previous_secret_expires_at: null });
    expect(verifies(WHSEC_OLD, noExpiry.rec)).toBe(false);
  });

  it('no secret: webhook-id and webhook-timestamp, no signature headers', async () => {
    for (const secret of [null, '']) {
      const { rec, id } = await deliver({ secret });
      const h = hdrs(rec);
      expect(h['webhook-id']).toBe(id);
      expect(h['webhook-timestamp']).toBe(String(Math.floor(clock.now() / 1000)));
      expect(h['webhook-signature']).toBeUndefined();
      expect(h['x-svc-signature']).toBeUndefined();
    }
  });

  it("a bare secret string still works; without an eventId the body's id is the webhook-id", async () => {
    const body = JSON.stringify({ id: 'evt_from_body', type: 't' });
    const r = await deliverer().deliver({ url: rx.hook('bare'), secret: 'bare-secret' }, body);
    expect(r.delivered).toBe(true);
    const [rec] = rx.at('bare');
    expect(hdrs(rec)['webhook-id']).toBe('evt_from_body');
    expect(verifies('bare-secret', rec)).toBe(true);
    expect(hdrs(rec)['x-svc-signature']).toBe(hmacHex('bare-secret', rec.raw));
  });
});

describe('secret forms (pure)', () => {
  const body = Buffer.from(JSON.stringify({ id: 'evt_forms', data: 'ü' }));
  const now = Date.now();

  it('odd whsec_ secrets key exactly as the stock library keys them (decoded when it accepts the base64, else raw UTF-8)', () => {
    const secrets = [
      'whsec_listen', // 6 characters: the library decodes them (no padding needed)
      'whsec_abc', // too short for the library: raw
      'whsec_a-b_cdef', // URL-safe alphabet: the library refuses it: raw
      'whsec_AA==',
      'whsec_A===', // too much padding: raw
      'whsec_',
      'whsec_ AAAA',
      'WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', // the prefix is case-sensitive
      'plain',
    ];
    for (const secret of secrets) {
      // a receiver's rule: a whsec_ secret as given when the library takes it, anything else raw
      let lib: Webhook;
      try {
        if (!secret.startsWith('whsec_')) throw new Error('not whsec_');
        lib = new Webhook(secret);
      } catch {
        lib = new Webhook(secret, { format: 'raw' });
      }
      const h = signatureHeaders(signingKeys({ secret }), 'evt_forms', body, now);
      expect(() => lib.verify(body, h as unknown as Headers), secret).not.toThrow();
    }
  });

  it('a plain secret keys with its UTF-8 bytes (the stock library needs them as a Uint8Array for non-ASCII)', () => {
    const secret = 'pässwörd-✓';
    expect(standardWebhooksKey(secret).equals(Buffer.from(secret, 'utf8'))).toBe(true);
    const h = signatureHeaders(signingKeys({ secret }), 'evt_forms', body, now) as unknown as Headers;
    expect(() => new Webhook(new TextEncoder().encode(secret), { format: 'raw' }).verify(body, h)).not.toThrow();
    expect(h['x-svc-signature']).toBe(hmacHex(secret, body));
  });

  it("checkDelivery (what svc listen uses) agrees with the stock library's signer, refuses stale timestamps and wrong secrets", () => {
    const lib = new Webhook(WHSEC_NEW);
    const ts = Math.floor(now / 1000);
    const headers = {
      'webhook-id': 'evt_forms',
      'webhook-timestamp': String(ts),
      'webhook-signature': `v1,bogus ${lib.sign('evt_forms', new Date(ts * 1000), body)}`,
    };
    const keys = signingKeys({ secret: WHSEC_NEW })!;
    expect(checkDelivery(keys, headers, body, now)).toMatchObject({
      ok: true,
      standard: 'valid',
      standardIndex: 1,
      standardCount: 2,
      svc: 'missing',
      timestamp: 'ok',
    });
    expect(checkDelivery(keys, headers, body, now + (TIMESTAMP_TOLERANCE_S + 1) * 1000)).toMatchObject({
      ok: false,
      standard: 'valid',
      timestamp: 'stale',
    });
    expect(checkDelivery(keys, headers, body, now - (TIMESTAMP_TOLERANCE_S + 1) * 1000)).toMatchObject({ ok: false, timestamp: 'stale' });
    expect(checkDelivery(keys, headers, body, now + TIMESTAMP_TOLERANCE_S * 1000)).toMatchObject({ ok: true });
    expect(checkDelivery(signingKeys({ secret: WHSEC_OLD })!, headers, body, now)).toMatchObject({ ok: false, standard: 'invalid' });
    expect(checkDelivery(keys, { ...headers, 'webhook-id': 'evt_other' }, body, now)).toMatchObject({ ok: false, standard: 'invalid' });
    expect(checkDelivery(keys, headers, Buffer.concat([body, Buffer.from(' ')]), now)).toMatchObject({ ok: false });
    expect(checkDelivery(keys, { ...headers, 'webhook-timestamp': 'soon' }, body, now)).toMatchObject({ ok: false, timestamp: 'invalid' });
    expect(checkDelivery(keys, {}, body, now)).toMatchObject({ ok: false, svc: 'missing', standard: 'missing', timestamp: 'missing' });
    // X-Svc-Signature alone (no Standard Webhooks headers) verifies but is not enough: it signs no
    // time, so a replay could not be told apart (CONTRACT 6.7); nor with a fresh timestamp beside it
    expect(checkDelivery(keys, { 'x-svc-signature': hmacHex(WHSEC_NEW, body) }, body, now)).toMatchObject({
      ok: false,
      svc: 'valid',
      standard: 'missing',
    });
    expect(checkDelivery(keys, { 'x-svc-signature': hmacHex(WHSEC_NEW, body), 'webhook-timestamp': String(ts) }, body, now)).toMatchObject({
      ok: false,
      svc: 'valid',
      timestamp: 'ok',
    });
  });
});

describe('header names (pure)', () => {
  it('each is spelled once, lowercase as sent; X-Svc-Signature is how svc listen prints the svc signature', () => {
    expect([WEBHOOK_ID_HEADER, WEBHOOK_TIMESTAMP_HEADER, WEBHOOK_SIGNATURE_HEADER, SVC_SIGNATURE_HEADER, RECOVERY_HEADER]).toEqual([
      'webhook-id',
      'webhook-timestamp',
      'webhook-signature',
      'x-svc-signature',
      'x-svc-recovery',
    ]);
    expect(SIGNATURE_HEADER).toBe('X-Svc-Signature');
  });
});
