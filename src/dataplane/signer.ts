// The signer of a pipeline: each subscriber's key material prepared once (src/delivery/signing.ts),
// then the signature and id headers of each attempt (CONTRACT 6.4).
//
// An HMAC is a function of its key and message alone, so webhooks that share a secret can share
// an event's signatures: X-Svc-Signature is the HMAC of (secret, body), the same at every attempt
// of that body; webhook-signature the HMAC of (secret, "<id>.<timestamp>.<body>"), the same within
// one second of the clock. The last signatures made for each body are kept beside it (a WeakMap:
// they go when the body does) and reused when the next attempt of that body has the same secret.
// A webhook in a rotation's overlap (two keys) is always signed afresh.
import {
  SVC_SIGNATURE_HEADER,
  sign,
  signatureHeaders,
  signingKeys,
  standardSignature,
  WEBHOOK_ID_HEADER,
  WEBHOOK_SIGNATURE_HEADER,
  WEBHOOK_TIMESTAMP_HEADER,
  type SigningKeys,
} from '../delivery/signing.ts';
import type { WebhookSubscriber } from '../dispatch/subscriber.ts';
import type { Signer } from './pipeline.ts';

/** The signatures last made for one body. */
interface BodySignatures {
  secret: string;
  /** X-Svc-Signature under secret */
  svc: string;
  id: string;
  timestamp: string;
  /** webhook-signature of (id, timestamp) under secret */
  standard: string;
}

export function makeSigner(): Signer {
  const prepared = new WeakMap<WebhookSubscriber, SigningKeys | null>();
  const lastSigned = new WeakMap<Buffer, BodySignatures>();
  return (sub, eventId, body, nowMs) => {
    let keys = prepared.get(sub);
    if (keys === undefined) prepared.set(sub, (keys = signingKeys(sub.entry)));
    const secret = sub.entry.secret;
    if (!keys || keys.previous || !secret) return signatureHeaders(keys, eventId, body, nowMs) as unknown as Record<string, string>;
    const timestamp = String(Math.floor(nowMs / 1000));
    let last = lastSigned.get(body);
    if (!last) lastSigned.set(body, (last = { secret: '', svc: '', id: '', timestamp: '', standard: '' }));
    if (last.secret !== secret) {
      last.secret = secret;
      last.svc = sign(keys.svc, body);
      last.id = ''; // webhook-signature is made again below too
    }
    if (last.id !== eventId || last.timestamp !== timestamp) {
      last.id = eventId;
      last.timestamp = timestamp;
      last.standard = standardSignature(keys.current, eventId, timestamp, body);
    }
    // a new object each time: the caller may add a header to it (X-Svc-Recovery)
    return {
      [WEBHOOK_ID_HEADER]: eventId,
      [WEBHOOK_TIMESTAMP_HEADER]: timestamp,
      [WEBHOOK_SIGNATURE_HEADER]: last.standard,
      [SVC_SIGNATURE_HEADER]: last.svc,
    };
  };
}
