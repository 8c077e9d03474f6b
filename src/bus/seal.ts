// Trust between the control plane and the data plane (CONTRACT 6.7), with one 32-byte data plane
// key: the engine seals every batch of events it publishes (HMAC over the batch id, the time it
// publishes it and the message, which holds each event's id, route and body) and the data plane
// drops what does not open, or was stored by JetStream long after it was sealed (a replay,
// src/dataplane/sources/jetstream/source.ts); webhook entries replicated to the data
// plane are encrypted and authenticated (AES-256-GCM), so the bus never carries a webhook secret in
// the clear and a forged entry is refused; progress records and outcome batches travelling back are
// sealed too. This holds on a NATS server with no authentication at all: only holders of the key
// can seal.
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
  private readonly hopKey: Buffer;
  private readonly entryKey: Buffer;
  private readonly batchKey: Buffer;
  private readonly progressKey: Buffer;

  constructor(key: Buffer) {
    if (key.length !== DATAPLANE_KEY_BYTES) throw new Error(`a data plane key is ${DATAPLANE_KEY_BYTES} bytes`);
    this.hopKey = subkey(key, 'event batch v1');
    this.entryKey = subkey(key, 'registry entry');
    this.batchKey = subkey(key, 'outcome batch');
    this.progressKey = subkey(key, 'progress record');
  }

  private hopMac(batchId: string, sealedAt: string, body: Uint8Array | string): Buffer {
    return createHmac('sha256', this.hopKey).update(batchId).update(NL).update(sealedAt).update(NL).update(body).digest();
  }

  /**
   * The seal of a batch of events (src/bus/hop.ts), `<ms>.<base64url mac>`: the time it is
   * published and a MAC over the batch id, that time and the exact message body (every event's id,
   * route and body). Its own key, apart from those of the other sealed things.
   */
  sealHop(batchId: string, body: Uint8Array | string, sealedAt: number): string {
    const at = String(Math.floor(sealedAt));
    return `${at}.${this.hopMac(batchId, at, body).toString('base64url')}`;
  }

  /** When the engine sealed exactly this batch (ms), or null when seal is not its seal of it. Constant time. */
  openHop(batchId: string, body: Uint8Array | string, seal: string): number | null {
    const dot = seal.indexOf('.');
    if (dot < 1 || dot > 16) return null;
    const at = seal.slice(0, dot);
    if (!/^\d+$/.test(at)) return null;
    return sameMac(seal.slice(dot + 1), this.hopMac(batchId, at, body)) ? Number(at) : null;
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

  private recordMac(key: string, text: string): Buffer {
    return createHmac('sha256', this.progressKey).update(key).update(NL).update(text).digest();
  }

  /** A progress record as stored (`<base64url mac>.<text>`), bound to its key (the event id). */
  sealRecord(key: string, text: string): string {
    return `${this.recordMac(key, text).toString('base64url')}.${text}`;
  }

  /** The text of a sealed progress record, or null when it was not sealed with this key for this key. */
  openRecord(key: string, sealed: string): string | null {
    const dot = sealed.indexOf('.');
    if (dot < 1) return null;
    const text = sealed.slice(dot + 1);
    return sameMac(sealed.slice(0, dot), this.recordMac(key, text)) ? text : null;
  }
}
