// What an attempt keeps of its exchange (CONTRACT 4.5, new in 0.3): the request headers svc sent
// (each signature cut to its first 8 characters after any `v1,` prefix; never a secret, which is
// never a header), and the receiver's status, headers (at most 8 KiB) and the first 4 KiB of its
// body (UTF-8 text, or base64 when it is not). Bounded per attempt (CONTRACT 8): the body is copied
// as it is read, at most BODY_KEEP bytes, the rest only counted by the caller; the record is made
// once, as one JSON string, when the attempt ends, and travels and is stored as that string.
import { isUtf8 } from 'node:buffer';

/** The first this many bytes of a receiver's body are kept. */
export const BODY_KEEP = 4 * 1024;
/** At most this many bytes of a receiver's headers (`name: value` lines) are kept. */
export const HEADERS_KEEP = 8 * 1024;
/** What is kept of each signature value. */
export const SIGNATURE_KEEP = 8;

const SIGNATURE_HEADERS = new Set(['webhook-signature', 'x-svc-signature']);

export interface KeptResponse {
  status: number;
  headers: Record<string, string>;
  headers_truncated?: true;
  body: string;
  body_encoding?: 'base64';
  body_truncated: boolean;
}

export interface KeptExchange {
  request: { headers: Record<string, string> } | null;
  response: KeptResponse | null;
}

/** A signature header's value with each signature cut to its first 8 characters (after a `v1,` prefix). */
export function redactSignature(value: string): string {
  return value
    .split(' ')
    .map((part) => {
      const comma = part.indexOf(',');
      const prefix = comma >= 0 && comma <= 3 ? part.slice(0, comma + 1) : '';
      return prefix + part.slice(prefix.length, prefix.length + SIGNATURE_KEEP);
    })
    .join(' ');
}

/** The request headers as sent, signatures redacted; `own` are `name: value\r\n` lines (the deliverer's own). */
export function requestHeaders(host: string, own: string, extra: Record<string, string>, bodyLength: number): Record<string, string> {
  const h: Record<string, string> = { host };
  for (const line of own.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) h[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  for (const name in extra) {
    const lower = name.toLowerCase();
    h[lower] = SIGNATURE_HEADERS.has(lower) ? redactSignature(extra[name]) : extra[name];
  }
  h['content-length'] = String(bodyLength);
  return h;
}

/** The headers of an answer's head (status line first), at most HEADERS_KEEP bytes of them; repeated names joined with ", ". */
export function responseHeaders(head: string): { headers: Record<string, string>; truncated: boolean } {
  const headers: Record<string, string> = {};
  let used = 0;
  let truncated = false;
  const lines = head.split(/\r?\n/);
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    if (!line) continue;
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    used += line.length + 2;
    if (used > HEADERS_KEEP) {
      truncated = true;
      break;
    }
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  return { headers, truncated };
}

/** The kept body: text when it is UTF-8 (a character cut at the end does not count against it), else base64. */
export function keptBody(bytes: Buffer, truncated: boolean): { body: string; body_encoding?: 'base64' } {
  if (isUtf8(bytes)) return { body: bytes.toString('utf8') };
  if (truncated) {
    // a multi-byte character cut at BODY_KEEP: drop its first bytes
    for (let cut = 1; cut <= 3 && cut < bytes.length; cut++) {
      const head = bytes.subarray(0, bytes.length - cut);
      if (isUtf8(head)) return { body: head.toString('utf8') };
    }
  }
  return { body: bytes.toString('base64'), body_encoding: 'base64' };
}

/** The first BODY_KEEP bytes of a body, copied as it is read. */
export class BodyKeeper {
  private kept: Buffer | null = null;
  private length = 0;
  /** all the body's bytes read, kept or not */
  total = 0;

  add(bytes: number, chunk: Buffer, start: number): void {
    this.total += bytes;
    const room = BODY_KEEP - this.length;
    if (room <= 0) return;
    const n = Math.min(room, bytes);
    // a small answer (the usual) takes only its size, from Node's shared pool
    this.kept ??= Buffer.allocUnsafe(n);
    if (this.kept.length < this.length + n) {
      const bigger = Buffer.allocUnsafe(BODY_KEEP);
      this.kept.copy(bigger, 0, 0, this.length);
      this.kept = bigger;
    }
    chunk.copy(this.kept, this.length, start, start + n);
    this.length += n;
  }

  bytes(): Buffer {
    return this.kept ? this.kept.subarray(0, this.length) : Buffer.alloc(0);
  }
}

/**
 * The record of an exchange as one JSON string: request headers (null when nothing was sent),
 * response (null without a status). `cut`: the body was not read to its end.
 */
export function exchangeRecord(request: Record<string, string> | null, status: number | undefined, head: string, body: BodyKeeper | null, cut: boolean): string {
  let response: KeptResponse | null = null;
  if (status !== undefined) {
    const { headers, truncated } = responseHeaders(head);
    const bytes = body ? body.bytes() : Buffer.alloc(0);
    const bodyTruncated = cut || (body !== null && body.total > bytes.length);
    response = { status, headers, ...(truncated ? { headers_truncated: true as const } : {}), ...keptBody(bytes, bodyTruncated), body_truncated: bodyTruncated };
  }
  const kept: KeptExchange = { request: request ? { headers: request } : null, response };
  return JSON.stringify(kept);
}

/** A stored record read back (null: none kept, an attempt from before 0.3, or unreadable). */
export function parseExchange(text: string | null | undefined): KeptExchange | null {
  if (!text) return null;
  try {
    const v = JSON.parse(text) as KeptExchange;
    return v && typeof v === 'object' ? { request: v.request ?? null, response: v.response ?? null } : null;
  } catch {
    return null;
  }
}
