// Signature and id headers of an attempt (CONTRACT 6.4): X-Svc-Signature (hex HMAC of the body,
// current secret), and Standard Webhooks webhook-id / webhook-timestamp / webhook-signature (both
// secrets during a rotation's overlap, new first). Key material is prepared once per subscriber.
import { createHmac } from 'node:crypto';
import type { WebhookSubscriber } from '../dispatch/subscriber.ts';
import type { Signer } from './pipeline.ts';

interface Keys {
  secret: string | null;
  current: Buffer | null;
  previous: Buffer | null;
  previousUntil: number;
}

/** A `whsec_<base64>` secret signs with the bytes it encodes; any other secret with its UTF-8 bytes. */
export function signingKey(secret: string): Buffer {
  if (secret.startsWith('whsec_')) {
    const raw = Buffer.from(secret.slice('whsec_'.length), 'base64');
    if (raw.length > 0) return raw;
  }
  return Buffer.from(secret, 'utf8');
}

function keysOf(sub: WebhookSubscriber): Keys {
  const e = sub.entry;
  return {
    secret: e.secret,
    current: e.secret ? signingKey(e.secret) : null,
    previous: e.secret && e.previous_secret && e.previous_secret_expires_at ? signingKey(e.previous_secret) : null,
    previousUntil: e.previous_secret_expires_at ? Date.parse(e.previous_secret_expires_at) : 0,
  };
}

export function makeSigner(): Signer {
  const cache = new WeakMap<WebhookSubscriber, Keys>();
  return (sub, eventId, body, nowMs) => {
    let k = cache.get(sub);
    if (!k) cache.set(sub, (k = keysOf(sub)));
    const ts = String(Math.floor(nowMs / 1000));
    const h: Record<string, string> = { 'webhook-id': eventId, 'webhook-timestamp': ts };
    if (!k.current || !k.secret) return h;
    h['x-svc-signature'] = createHmac('sha256', k.secret).update(body).digest('hex');
    const v1 = (key: Buffer) => `v1,${createHmac('sha256', key).update(eventId).update('.').update(ts).update('.').update(body).digest('base64')}`;
    h['webhook-signature'] = k.previous && nowMs < k.previousUntil ? `${v1(k.current)} ${v1(k.previous)}` : v1(k.current);
    return h;
  };
}
