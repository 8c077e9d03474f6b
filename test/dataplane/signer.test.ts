// The data plane's signer (src/dataplane/signer.ts): webhooks sharing a secret share an event's
// signatures, and every attempt's headers still verify under its own webhook's secret (CONTRACT
// 6.4), whatever the order of attempts, secrets, bodies and seconds. Checked with the stock
// `standardwebhooks` library, as a receiver would.
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { makeSigner } from '../../src/dataplane/signer.ts';
import { WebhookSubscriber } from '../../src/dispatch/subscriber.ts';
import type { WebhookEntry } from '../../src/domain/webhook-entry.ts';

const SECRET_A = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const SECRET_B = 'plain secret b';
const OLD = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD';

function sub(id: string, secret: string | null, previous: { secret: string; until: string } | null = null): WebhookSubscriber {
  const entry: WebhookEntry = {
    webhook_id: id,
    org_id: 'org_a',
    url: `http://127.0.0.1:1/${id}`,
    secret,
    previous_secret: previous?.secret ?? null,
    previous_secret_expires_at: previous?.until ?? null,
    interests: { all_events: true },
    match: null,
  };
  return new WebhookSubscriber(entry);
}

/** Does the stock library accept these headers for this body under this secret (at the headers' own time)? */
function verifies(secret: string, body: Buffer, headers: Record<string, string>): boolean {
  const wh = secret.startsWith('whsec_') ? new Webhook(secret) : new Webhook(secret, { format: 'raw' });
  try {
    const at = Number(headers['webhook-timestamp']) * 1000;
    const realNow = Date.now;
    Date.now = () => at;
    try {
      wh.verify(body, headers);
    } finally {
      Date.now = realNow;
    }
    return true;
  } catch {
    return false;
  }
}

const svcSig = (secret: string, body: Buffer) => createHmac('sha256', secret).update(body).digest('hex');

describe('the data plane signer', () => {
  it('signs every attempt under its own webhook secret, interleaving secrets, events and seconds', () => {
    const signer = makeSigner();
    const a1 = sub('wh_a1', SECRET_A);
    const a2 = sub('wh_a2', SECRET_A);
    const b = sub('wh_b', SECRET_B);
    const none = sub('wh_none', null);
    const rotating = sub('wh_rot', SECRET_A, { secret: OLD, until: '2030-01-01T00:00:00Z' });
    const bodies = [Buffer.from('{"id":"evt_1"}'), Buffer.from('{"id":"evt_2"}')];
    const t0 = Date.parse('2026-01-01T00:00:00.000Z');
    const order = [a1, a2, b, a1, rotating, a2, none, b, a2, a1];
    for (const [step, s] of order.entries()) {
      const i = step % 2;
      const body = bodies[i];
      // a new second every third attempt
      const now = t0 + Math.floor(step / 3) * 1000 + 123;
      const h = signer(s, `evt_${i + 1}`, body, now);
      expect(h['webhook-id']).toBe(`evt_${i + 1}`);
      expect(h['webhook-timestamp']).toBe(String(Math.floor(now / 1000)));
      const secret = s.entry.secret;
      if (secret === null) {
        expect(h['x-svc-signature']).toBeUndefined();
        expect(h['webhook-signature']).toBeUndefined();
        continue;
      }
      expect(h['x-svc-signature']).toBe(svcSig(secret, body));
      expect(verifies(secret, body, h)).toBe(true);
      if (s === rotating) {
        expect(h['webhook-signature'].split(' ')).toHaveLength(2);
        expect(verifies(OLD, body, { ...h, 'webhook-signature': h['webhook-signature'].split(' ')[1] })).toBe(true);
      }
    }
  });

  it('gives each attempt a headers object of its own (the pipeline adds X-Svc-Recovery to one)', () => {
    const signer = makeSigner();
    const body = Buffer.from('{"id":"evt_1"}');
    const first = signer(sub('wh_1', SECRET_A), 'evt_1', body, 0);
    first['x-svc-recovery'] = 'rec_1';
    const second = signer(sub('wh_2', SECRET_A), 'evt_1', body, 0);
    expect(second['x-svc-recovery']).toBeUndefined();
    expect(second['x-svc-signature']).toBe(first['x-svc-signature']);
  });
});
