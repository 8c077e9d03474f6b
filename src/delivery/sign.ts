// Webhook signatures (spec 5, CONTRACT 6.4): X-Svc-Signature is the lowercase hex
// HMAC-SHA256 of the exact request body bytes, keyed with the webhook's secret (its UTF-8 bytes).
// The Standard Webhooks headers beside it are in signatures.ts.
import { createHmac, timingSafeEqual } from 'node:crypto';

export const SIGNATURE_HEADER = 'X-Svc-Signature';

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
