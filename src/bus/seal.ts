// Trust between the control plane and the data plane (CONTRACT 6.7), with one 32-byte data plane
// key: the engine seals every event it publishes (HMAC over id, route and body) and the data plane
// drops what does not open; webhook entries replicated to the data plane are encrypted and
// authenticated (AES-256-GCM), so the bus never carries a webhook secret in the clear and a forged
// entry is refused; outcome batches travelling back are sealed too. This holds on a NATS server
// with no authentication at all: only holders of the key can seal.
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

export const DATAPLANE_KEY_BYTES = 32;

export function newDataplaneKey(): Buffer {
  return randomBytes(DATAPLANE_KEY_BYTES);
}

/** A data plane key from its base64 text (as in a credentials file or SVC_DATAPLANE_KEY). */
export function parseDataplaneKey(text: string): Buffer {
  const key = Buffer.from(text.trim(), 'base64');
  if (key.length !== DATAPLANE_KEY_BYTES) throw new Error(`a data plane key is ${DATAPLANE_KEY_BYTES} bytes in base64`);
  return key;
}

const subkey = (key: Buffer, purpose: string): Buffer => Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), `svc ${purpose}`, 32));
const NL = Buffer.from('\n');

function sameMac(given: string, expected: Buffer): boolean {
  const g = Buffer.from(given, 'base64url');
  return g.length === expected.length && timingSafeEqual(g, expected);
}

export class Seal {
  private readonly eventKey: Buffer;
  private readonly entryKey: Buffer;
  private readonly batchKey: Buffer;

  constructor(key: Buffer) {
    if (key.length !== DATAPLANE_KEY_BYTES) throw new Error(`a data plane key is ${DATAPLANE_KEY_BYTES} bytes`);
    this.eventKey = subkey(key, 'event seal');
    this.entryKey = subkey(key, 'registry entry');
    this.batchKey = subkey(key, 'outcome batch');
  }

  private eventMac(id: string, route: string, body: Uint8Array | string): Buffer {
    return createHmac('sha256', this.eventKey).update(id).update(NL).update(route).update(NL).update(body).digest();
  }

  /** The seal of an event (base64url), over its id, its encoded route and its exact body bytes. */
  sealEvent(id: string, route: string, body: Uint8Array | string): string {
    return this.eventMac(id, route, body).toString('base64url');
  }

  /** Whether seal is the engine's seal of exactly this id, route and body. Constant time. */
  opensEvent(id: string, route: string, body: Uint8Array | string, seal: string): boolean {
    return sameMac(seal, this.eventMac(id, route, body));
  }

  /** Encrypt and authenticate a replicated value (base64: iv | ciphertext | tag); aad binds it to its key. */
  encrypt(plaintext: string, aad: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.entryKey, iv);
    c.setAAD(Buffer.from(aad));
    const body = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
    return Buffer.concat([iv, body, c.getAuthTag()]).toString('base64');
  }

  /** The plaintext of an encrypted value, or null when it was not made with this key for this aad. */
  decrypt(text: string, aad: string): string | null {
    try {
      const raw = Buffer.from(text, 'base64');
      if (raw.length < 12 + 16) return null;
      const d = createDecipheriv('aes-256-gcm', this.entryKey, raw.subarray(0, 12));
      d.setAAD(Buffer.from(aad));
      d.setAuthTag(raw.subarray(raw.length - 16));
      return Buffer.concat([d.update(raw.subarray(12, raw.length - 16)), d.final()]).toString('utf8');
    } catch {
      return null;
    }
  }

  sealBatch(body: Uint8Array | string): string {
    return createHmac('sha256', this.batchKey).update(body).digest('base64url');
  }

  opensBatch(body: Uint8Array | string, seal: string): boolean {
    return sameMac(seal, createHmac('sha256', this.batchKey).update(body).digest());
  }
}
