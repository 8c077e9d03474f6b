// What an attempt keeps of its exchange (CONTRACT 4.5, new in 0.3): the request headers svc sent
// (each signature cut to its first 8 characters after any `v1,` prefix; never a secret, which is
// never a header), and the receiver's status, headers (at most 8 KiB) and the first 4 KiB of its
// body (UTF-8 text, or base64 when it is not). Bounded per attempt (CONTRACT 8): the body is copied
// as it is read, at most BODY_KEEP bytes, the rest only counted by the caller; the record is made
// once, as one JSON string, when the attempt ends, and travels and is stored as that string.
import { isUtf8 } from 'node:buffer';
import { SVC_SIGNATURE_HEADER, WEBHOOK_SIGNATURE_HEADER } from './signing.ts';

/** The first this many bytes of a receiver's body are kept. */
export const BODY_KEEP = 4 * 1024;
/** At most this many bytes of a receiver's headers (`name: value` lines) are kept. */
export const HEADERS_KEEP = 8 * 1024;
/** What is kept of each signature value. */
export const SIGNATURE_KEEP = 8;

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
  if (value.indexOf(' ') < 0) return cutOne(value);
  return value.split(' ').map(cutOne).join(' ');
}

function cutOne(part: string): string {
  const comma = part.indexOf(',');
  const prefix = comma >= 0 && comma <= 3 ? comma + 1 : 0;
  return part.slice(0, prefix + SIGNATURE_KEEP);
}

/** Header lines (`name: value`, CRLF or LF) as an object: lowercase names, repeated names joined with ", ". */
export function headerObject(lines: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const line of lines.split('\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  return headers;
}

const SIGNATURE_NAMES = [`${WEBHOOK_SIGNATURE_HEADER}: `, `${SVC_SIGNATURE_HEADER}: `];

/** Request header lines (as the deliverer writes them: lowercase names, CRLF) with each signature value cut (redactSignature). */
export function redactLines(lines: string): string {
  let out = lines;
  for (const name of SIGNATURE_NAMES) {
    // found by indexOf, not a regular expression: this runs once per attempt
    let at = out.startsWith(name) ? 0 : out.indexOf(`\n${name}`);
    if (at < 0) continue;
    if (at > 0) at++;
    const from = at + name.length;
    let to = out.indexOf('\r', from);
    if (to < 0) to = out.length;
    out = out.slice(0, from) + redactSignature(out.slice(from, to)) + out.slice(to);
  }
  return out;
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
 * The record of an exchange as one JSON string, made on the delivery path: so it is made with as
 * little work as possible, as an array of the texts as sent and read (turned into the API's
 * objects only when read, parseExchange): [request header lines | null] without a response, else
 * [request header lines | null, status, response header lines (at most HEADERS_KEEP), headers cut
 * (0|1), body, base64 (0|1), body truncated (0|1)]. `request` is the header lines as sent
 * (`name: value\r\n` each; null when nothing was sent); `cut`: the body was not read to its end.
 */
export function exchangeRecord(
  request: string | null,
  status: number | undefined,
  head: string,
  body: BodyKeeper | null,
  cut: boolean,
): string {
  const req = request === null ? null : redactLines(request);
  if (status === undefined) return JSON.stringify([req]);
  // the header lines, without the status line and the empty line that ends them
  const from = head.indexOf('\n') + 1;
  let to = head.length;
  while (to > from && (head.charCodeAt(to - 1) === 10 || head.charCodeAt(to - 1) === 13)) to--;
  let headersCut = 0;
  if (to - from > HEADERS_KEEP) {
    const nl = head.lastIndexOf('\n', from + HEADERS_KEEP);
    to = Math.max(nl, from);
    headersCut = 1;
  }
  const bytes = body ? body.bytes() : EMPTY;
  const truncated = cut || (body !== null && body.total > bytes.length);
  const b = keptBody(bytes, truncated);
  return JSON.stringify([req, status, head.slice(from, to), headersCut, b.body, b.body_encoding ? 1 : 0, truncated ? 1 : 0]);
}

const EMPTY = Buffer.alloc(0);

type Record7 = [string | null, number, string, 0 | 1, string, 0 | 1, 0 | 1];

/** A stored record read back, as the API shows it (null: none kept, an attempt from before 0.3, or unreadable). */
export function parseExchange(text: string | null | undefined): KeptExchange | null {
  if (!text) return null;
  try {
    const v = JSON.parse(text) as unknown;
    if (!Array.isArray(v)) return null;
    const [req, status, headers, headersCut, body, base64, truncated] = v as Record7;
    const request = typeof req === 'string' ? { headers: headerObject(req) } : null;
    if (typeof status !== 'number') return { request, response: null };
    const response: KeptResponse = {
      status,
      headers: headerObject(headers),
      ...(headersCut ? { headers_truncated: true as const } : {}),
      body,
      ...(base64 ? { body_encoding: 'base64' as const } : {}),
      body_truncated: truncated === 1,
    };
    return { request, response };
  } catch {
    return null;
  }
}
