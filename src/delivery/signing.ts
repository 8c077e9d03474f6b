// Signing a delivery and checking one (CONTRACT 6.4): the one module that names the headers of a
// delivery and makes their HMACs. Pure and small: it runs once per delivery attempt.
//
//   X-Svc-Signature    lowercase hex HMAC-SHA256 of the exact body bytes, keyed with the current
//                      secret's UTF-8 bytes (sign)
//   webhook-id         the CloudEvent id (the same on every attempt of that event)
//   webhook-timestamp  unix seconds of this attempt
//   webhook-signature  Standard Webhooks: `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`,
//                      keyed with the bytes a `whsec_<base64>` secret encodes, else with the
//                      secret's UTF-8 bytes; during a rotation's overlap the new secret's and the
//                      old one's, space-separated, new first.
//   X-Svc-Recovery     on a recovered attempt its recovery id, on a resent one `resend` (CONTRACT 4.5)
//
// Names are spelled here once, lowercase (as svc sends them and Node reads them); the pipeline's
// signer (src/dataplane/signer.ts) reuses an event's signatures across webhooks that share a secret.
// Key material is prepared once per webhook (signingKeys), so an attempt costs only its HMACs.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { WebhookRow } from '../../store/webhooks.ts';

export const SVC_SIGNATURE_HEADER = 'x-svc-signature';
export const WEBHOOK_ID_HEADER = 'webhook-id';
export const WEBHOOK_TIMESTAMP_HEADER = 'webhook-timestamp';
export const WEBHOOK_SIGNATURE_HEADER = 'webhook-signature';
/** The header of a recovered or resent attempt (CONTRACT 4.5): the recovery id, or RESEND. */
export const RECOVERY_HEADER = 'x-svc-recovery';
/** The recovery id of a resent attempt (`X-Svc-Recovery: resend`). */
export const RESEND = 'resend';

/** A header name as svc's documents and `svc listen` print it: `X-Svc-Signature`. */
const displayName = (name: string): string => name.replace(/(^|-)([a-z])/g, (_, dash: string, c: string) => dash + c.toUpperCase());
/** SVC_SIGNATURE_HEADER as printed (`X-Svc-Signature`). */
export const SIGNATURE_HEADER = displayName(SVC_SIGNATURE_HEADER);

export const WHSEC_PREFIX = 'whsec_';
/** A receiver refuses a webhook-timestamp further than this from its own clock (Standard Webhooks: 5 minutes). */
export const TIMESTAMP_TOLERANCE_S = 5 * 60;

/**
 * Lowercase hex HMAC-SHA256 of body (a string is taken as UTF-8), keyed with the secret (a string
 * is taken as UTF-8; a Buffer is the same key prepared once: Buffer.from(secret, 'utf8')).
 */
export function sign(secret: string | Buffer, body: string | Buffer | Uint8Array): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/**
 * True when signatureHeader is the signature of body under secret. Constant time over the
 * digest; a missing, malformed or wrong-length header is false. Hex case is not significant.
 */
export function verify(
  secret: string | Buffer,
  body: string | Buffer | Uint8Array,
  signatureHeader: string | string[] | null | undefined,
): boolean {
  if (Array.isArray(signatureHeader)) signatureHeader = signatureHeader.length === 1 ? signatureHeader[0] : undefined;
  if (typeof signatureHeader !== 'string') return false;
  const given = signatureHeader.trim().toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(given)) return false;
  const expected = Buffer.from(sign(secret, body), 'hex');
  const actual = Buffer.from(given, 'hex');
  if (actual.length !== expected.length) return false;
  return timingSafeEqual(actual, expected);
}

/** The secret columns of a webhook; the previous ones may be left out (no rotation in progress). */
export type WebhookSecrets = Pick<WebhookRow, 'secret'> & Partial<Pick<WebhookRow, 'previous_secret' | 'previous_secret_expires_at'>>;

/** A webhook's key material, prepared once (signingKeys). */
export interface SigningKeys {
  /** X-Svc-Signature: the current secret's UTF-8 bytes */
  readonly svc: Buffer;
  /** webhook-signature: the current secret's Standard Webhooks key */
  readonly current: Buffer;
  /** webhook-signature: the rotated-out secret's key, signing beside the current one until previousUntilMs */
  readonly previous: Buffer | null;
  readonly previousUntilMs: number;
}

/** The signature headers of one attempt (lowercase names, ready for a request). */
export interface SignatureHeaders {
  [WEBHOOK_ID_HEADER]: string;
  [WEBHOOK_TIMESTAMP_HEADER]: string;
  [WEBHOOK_SIGNATURE_HEADER]?: string;
  [SVC_SIGNATURE_HEADER]?: string;
}

/**
 * What the stock `standardwebhooks` library accepts after `whsec_` (its base64 decoder): at least
 * 4 characters of the standard alphabet, at most two `=` at the end. Anything else is not a
 * whsec_ secret, and keys with its UTF-8 bytes (the library's `{format: "raw"}`).
 */
const WHSEC_BASE64 = /^(?=[A-Za-z0-9+/=]{4})[A-Za-z0-9+/]*={0,2}$/;

/** The Standard Webhooks key of a secret: the bytes a `whsec_<base64>` secret encodes, else its UTF-8 bytes. */
export function standardWebhooksKey(secret: string): Buffer {
  if (secret.startsWith(WHSEC_PREFIX)) {
    const b64 = secret.slice(WHSEC_PREFIX.length);
    if (WHSEC_BASE64.test(b64)) {
      const key = Buffer.from(b64, 'base64');
      if (key.length > 0) return key;
    }
  }
  return Buffer.from(secret, 'utf8');
}

/** Prepare a webhook's keys once; null when it has no secret (deliveries are not signed). */
export function signingKeys(w: WebhookSecrets): SigningKeys | null {
  if (!w.secret) return null;
  const until = w.previous_secret && w.previous_secret_expires_at ? Date.parse(w.previous_secret_expires_at) : Number.NaN;
  const overlap = Number.isFinite(until) && w.previous_secret !== w.secret;
  return {
    svc: Buffer.from(w.secret, 'utf8'),
    current: standardWebhooksKey(w.secret),
    previous: overlap ? standardWebhooksKey(w.previous_secret as string) : null,
    previousUntilMs: overlap ? until : 0,
  };
}

/** `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` under a Standard Webhooks key. */
export function standardSignature(key: Buffer, id: string, timestamp: string, body: string | Buffer | Uint8Array): string {
  return `v1,${standardDigest(key, id, timestamp, body)}`;
}

function standardDigest(key: Buffer, id: string, timestamp: string, body: string | Buffer | Uint8Array): string {
  return createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64');
}

/**
 * The signature headers of one attempt at nowMs. Without keys only webhook-id and
 * webhook-timestamp; the rotated-out secret signs too while nowMs is before its expiry.
 */
export function signatureHeaders(
  keys: SigningKeys | null,
  id: string,
  body: Buffer | Uint8Array | string,
  nowMs: number,
): SignatureHeaders {
  const timestamp = String(Math.floor(nowMs / 1000));
  if (!keys) return { [WEBHOOK_ID_HEADER]: id, [WEBHOOK_TIMESTAMP_HEADER]: timestamp };
  let signature = standardSignature(keys.current, id, timestamp, body);
  if (keys.previous && nowMs < keys.previousUntilMs) signature += ` ${standardSignature(keys.previous, id, timestamp, body)}`;
  return {
    [WEBHOOK_ID_HEADER]: id,
    [WEBHOOK_TIMESTAMP_HEADER]: timestamp,
    [WEBHOOK_SIGNATURE_HEADER]: signature,
    [SVC_SIGNATURE_HEADER]: sign(keys.svc, body),
  };
}

// ---------------------------------------------------------------- checking (receivers: svc listen)

type HeaderValue = string | string[] | undefined;

const one = (v: HeaderValue): string | undefined => (Array.isArray(v) ? (v.length === 1 ? v[0] : undefined) : v);

/**
 * The 0-based position of the first `v1,` entry of a webhook-signature header that is the
 * signature of (id, timestamp, body) under key, or -1. Each comparison is constant time.
 */
export function matchStandardSignature(
  key: Buffer,
  id: string,
  timestamp: string,
  body: string | Buffer | Uint8Array,
  header: string,
): number {
  const expected = Buffer.from(standardDigest(key, id, timestamp, body), 'latin1');
  const entries = header.trim().split(/ +/);
  for (let i = 0; i < entries.length; i++) {
    const comma = entries[i].indexOf(',');
    if (comma < 0 || entries[i].slice(0, comma) !== 'v1') continue;
    const given = Buffer.from(entries[i].slice(comma + 1), 'latin1');
    if (given.length === expected.length && timingSafeEqual(given, expected)) return i;
  }
  return -1;
}

export type Check = 'valid' | 'invalid' | 'missing';

export interface DeliveryCheck {
  /** X-Svc-Signature against the secret */
  svc: Check;
  /** webhook-signature against the secret ('invalid' too when webhook-id or webhook-timestamp is missing) */
  standard: Check;
  /** which entry of webhook-signature verified (0 = the first), else -1 */
  standardIndex: number;
  /** how many entries webhook-signature lists */
  standardCount: number;
  /** webhook-timestamp: within TIMESTAMP_TOLERANCE_S of now ('ok'), outside ('stale'), not a number, or absent */
  timestamp: 'ok' | 'stale' | 'invalid' | 'missing';
  /** seconds between webhook-timestamp and now (positive: in the past), when it is a number */
  ageS: number | null;
  /** accepted: webhook-signature verified and webhook-timestamp is fresh (CONTRACT 6.7) */
  ok: boolean;
}

/**
 * Check a received delivery against one secret (prepared with signingKeys({secret})): accepted
 * when a v1 entry of webhook-signature verifies and webhook-timestamp is within
 * TIMESTAMP_TOLERANCE_S of nowMs (a replay is refused even with a good signature). X-Svc-Signature
 * is checked and reported, but alone it is not enough: it signs no time (CONTRACT 6.7).
 * `headers` are Node's (lowercase names).
 */
export function checkDelivery(keys: SigningKeys, headers: Record<string, HeaderValue>, body: Buffer, nowMs: number): DeliveryCheck {
  const svcHeader = headers[SVC_SIGNATURE_HEADER];
  const svc: Check = svcHeader === undefined ? 'missing' : verify(keys.svc, body, svcHeader) ? 'valid' : 'invalid';

  const id = one(headers[WEBHOOK_ID_HEADER]);
  const ts = one(headers[WEBHOOK_TIMESTAMP_HEADER]);
  const sigHeader = headers[WEBHOOK_SIGNATURE_HEADER];
  const sig = one(sigHeader);
  let standard: Check = sigHeader === undefined ? 'missing' : 'invalid';
  let standardIndex = -1;
  let standardCount = 0;
  let timestamp: DeliveryCheck['timestamp'] = 'missing';
  let ageS: number | null = null;
  if (ts !== undefined) {
    if (/^\d{1,15}$/.test(ts.trim())) {
      ageS = Math.floor(nowMs / 1000) - Number(ts.trim());
      timestamp = Math.abs(ageS) > TIMESTAMP_TOLERANCE_S ? 'stale' : 'ok';
    } else {
      timestamp = 'invalid';
    }
  }
  if (sig !== undefined) {
    standardCount = sig.trim().split(/ +/).filter(Boolean).length;
    if (id !== undefined && ts !== undefined && timestamp !== 'invalid') {
      standardIndex = matchStandardSignature(keys.current, id, ts.trim(), body, sig);
      if (standardIndex >= 0) standard = 'valid';
    }
  }
  // X-Svc-Signature alone signs no time: a captured delivery could be replayed for ever
  const ok = standard === 'valid' && timestamp === 'ok';
  return { svc, standard, standardIndex, standardCount, timestamp, ageS, ok };
}
