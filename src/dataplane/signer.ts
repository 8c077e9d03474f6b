// The signer of a pipeline: each subscriber's key material prepared once (src/delivery/signatures.ts),
// then the signature and id headers of each attempt (CONTRACT 6.4).
import { signatureHeaders, signingKeys, type SigningKeys } from '../delivery/signatures.ts';
import type { WebhookSubscriber } from '../dispatch/subscriber.ts';
import type { Signer } from './pipeline.ts';

export function makeSigner(): Signer {
  const cache = new WeakMap<WebhookSubscriber, SigningKeys | null>();
  return (sub, eventId, body, nowMs) => {
    let keys = cache.get(sub);
    if (keys === undefined) cache.set(sub, (keys = signingKeys(sub.entry)));
    return signatureHeaders(keys, eventId, body, nowMs) as unknown as Record<string, string>;
  };
}
