// Reading a receiver's answer on an HTTP/1.1 connection (RFC 9112), for src/delivery/http1.ts:
// where the answer ends, its status, and whether the connection may carry another request. The
// body is counted and handed on as it is read, never kept here (an attempt reads at most 64 KiB of
// it and keeps only its first 4 KiB: src/delivery/exchange-record.ts).
//
//   status line and headers (at most MAX_HEAD_BYTES) ─▶ 1xx: skipped, the next head follows
//                                                     ─▶ 204, 304: no body
//                                                     ─▶ Transfer-Encoding ending in chunked: chunks, then trailers
//                                                     ─▶ Content-Length: that many bytes
//                                                     ─▶ else: the body runs until the receiver closes
//
// Lenient where receivers commonly are (a bare LF ends a line, header names in any case, a repeated
// Content-Length of one value), strict where framing is at stake: a Content-Length that is not a
// number or names two lengths, a chunk size that is not hex, or an upgrade (never asked for) is an
// invalid answer and the connection is dropped.

/** The status line and headers of one answer, at most (Node's and undici's default limit). */
export const MAX_HEAD_BYTES = 16 * 1024;
/** A chunk-size line (with its extensions), at most. */
const MAX_CHUNK_LINE = 1024;

/** The receiver's answer is not HTTP/1.1 as a client can read it (its connection is dropped). */
export class InvalidResponse extends Error {
  override readonly name = 'InvalidResponse';
  /** as llhttp's errors are coded (src/delivery/attempt-errors.ts: "invalid HTTP response") */
  readonly code = 'HPE_INVALID_RESPONSE';
}

const Stage = { Head: 0, Length: 1, ChunkSize: 2, ChunkData: 3, ChunkEnd: 4, Trailers: 5, UntilClose: 6, Done: 7 } as const;
type Stage = (typeof Stage)[keyof typeof Stage];

const STATUS_CODE = /^[1-9]\d\d$/;
const CR = 0x0d;
const LF = 0x0a;

/** Where the head ends in buf (the index after its empty line), from `from`; -1 when not there yet. */
function headEnd(buf: Buffer, from: number): number {
  let i = buf.indexOf(LF, from);
  while (i >= 0) {
    // an empty line: LF LF, or LF CR LF
    const next = i + 1;
    if (next < buf.length && buf[next] === LF) return next + 1;
    if (next + 1 < buf.length && buf[next] === CR && buf[next + 1] === LF) return next + 2;
    i = buf.indexOf(LF, next);
  }
  return -1;
}

/**
 * One answer at a time: feed() it the bytes the connection reads until it says the answer ended,
 * then reset() before the next request (or drop the connection). Throws InvalidResponse.
 */
export class ResponseReader {
  /** the final status (after any 1xx), once its head is read; 0 before */
  status = 0;
  /** the final answer's status line and headers as read (latin1), once its head is read; '' before */
  head = '';
  /** the connection may carry another request after this answer (known once it ended) */
  keepAlive = true;
  /** the receiver's `Keep-Alive: timeout=<s>` hint, in ms; null without one */
  keepAliveHintMs: number | null = null;
  private stage: Stage = Stage.Head;
  /** head (or chunk-size line, or trailers) bytes read so far, when they came in pieces */
  private partial: Buffer | null = null;
  /** body bytes still to read (Length, ChunkData), or CRLF bytes after a chunk (ChunkEnd) */
  private left = 0;
  private trailerBytes = 0;

  /** The answer has been read to its end. */
  get done(): boolean {
    return this.stage === Stage.Done;
  }

  /** The body runs until the receiver closes the connection (only close() can end it). */
  get untilClose(): boolean {
    return this.stage === Stage.UntilClose;
  }

  reset(): void {
    this.status = 0;
    this.head = '';
    this.keepAlive = true;
    this.keepAliveHintMs = null;
    this.stage = Stage.Head;
    this.partial = null;
    this.left = 0;
    this.trailerBytes = 0;
  }

  /**
   * Read bytes of the answer. `onStatus` is called once the final status is known (with the head's
   * text), `onBody` with each run of body bytes (its count, and where it is: chunk[start, start +
   * bytes), valid only during the call). Returns where the answer ended in `chunk` (bytes after it
   * are not this answer's), or -1 when it has not ended yet.
   */
  feed(
    chunk: Buffer,
    onStatus: (status: number, head: string) => void,
    onBody: (bytes: number, chunk: Buffer, start: number) => void,
  ): number {
    let at = 0;
    while (at < chunk.length || this.stage === Stage.Done) {
      switch (this.stage) {
        case Stage.Done:
          return at;
        case Stage.Head: {
          const r = this.readHead(chunk, at);
          if (r < 0) return -1;
          at = r;
          if (this.status === 0) continue; // a 1xx: the next head follows
          onStatus(this.status, this.head);
          break;
        }
        case Stage.Length: {
          at = this.readCounted(chunk, at, onBody);
          if (this.left === 0) this.stage = Stage.Done;
          break;
        }
        case Stage.UntilClose: {
          const n = chunk.length - at;
          if (n) onBody(n, chunk, at);
          at = chunk.length;
          break;
        }
        case Stage.ChunkSize: {
          const r = this.readChunkSize(chunk, at);
          if (r < 0) return -1;
          at = r;
          break;
        }
        case Stage.ChunkData: {
          at = this.readCounted(chunk, at, onBody);
          if (this.left === 0) {
            this.stage = Stage.ChunkEnd;
            this.left = 2;
          }
          break;
        }
        case Stage.ChunkEnd: {
          // CRLF after a chunk's data (a bare LF too)
          const b = chunk[at];
          if (this.left === 2 && b === CR) {
            this.left = 1;
            at++;
          } else if (b === LF) {
            at++;
            this.stage = Stage.ChunkSize;
          } else {
            throw new InvalidResponse('a chunk is not followed by CRLF');
          }
          break;
        }
        case Stage.Trailers: {
          const r = this.readTrailers(chunk, at);
          if (r < 0) return -1;
          at = r;
          this.stage = Stage.Done;
          break;
        }
      }
    }
    return -1;
  }

  /**
   * The receiver closed the connection (after the bytes fed so far): true when that ends the answer
   * (a body that runs until close), false when the answer was cut short.
   */
  close(): boolean {
    if (this.stage === Stage.UntilClose) {
      this.stage = Stage.Done;
      this.keepAlive = false;
      return true;
    }
    return this.stage === Stage.Done;
  }

  /**
   * Body bytes whose count is known (a Content-Length body, a chunk's data): hand on those of
   * `chunk` from `at` still counted in `left`, and take them off. Returns where they end.
   */
  private readCounted(chunk: Buffer, at: number, onBody: (bytes: number, chunk: Buffer, start: number) => void): number {
    const n = Math.min(this.left, chunk.length - at);
    this.left -= n;
    if (n) onBody(n, chunk, at);
    return at + n;
  }

  /** With the bytes before: a whole head from `at`? Then parse it and return the index after it, else keep the bytes and return -1. */
  private readHead(chunk: Buffer, at: number): number {
    let buf = chunk;
    let start = at;
    let searchFrom = at;
    if (this.partial) {
      // look again from a little before the join (the empty line may straddle it)
      searchFrom = Math.max(0, this.partial.length - 3);
      buf = Buffer.concat([this.partial, chunk.subarray(at)]);
      start = 0;
    }
    const end = headEnd(buf, searchFrom);
    if (end < 0) {
      if (buf.length - start > MAX_HEAD_BYTES) throw new InvalidResponse('answer head too large');
      this.partial = start === 0 && buf !== chunk ? buf : Buffer.from(buf.subarray(start));
      return -1;
    }
    if (end - start > MAX_HEAD_BYTES) throw new InvalidResponse('answer head too large');
    const used = this.partial ? end - this.partial.length : end - at;
    this.partial = null;
    this.parseHead(buf.toString('latin1', start, end));
    return at + used;
  }

  /** The status line and headers (text up to and including the empty line). */
  private parseHead(head: string): void {
    let eol = head.indexOf('\n');
    const statusLine = head.charCodeAt(eol - 1) === CR ? head.slice(0, eol - 1) : head.slice(0, eol);
    // HTTP/1.x SSS[ reason]
    if (
      statusLine.length < 12 ||
      !statusLine.startsWith('HTTP/1.') ||
      statusLine[8] !== ' ' ||
      (statusLine.length > 12 && statusLine[12] !== ' ')
    ) {
      throw new InvalidResponse('not an HTTP/1.x status line');
    }
    const minor = statusLine.charCodeAt(7) - 48;
    const code = statusLine.slice(9, 12);
    if (!(minor === 0 || minor === 1) || !STATUS_CODE.test(code)) throw new InvalidResponse('not an HTTP/1.x status line');
    const status = Number(code);
    let length = -1;
    let chunked = false;
    let encoded = false;
    let close = minor === 0;
    let hint: number | null = null;
    let from = eol + 1;
    for (;;) {
      eol = head.indexOf('\n', from);
      if (eol < 0) break;
      const stop = head.charCodeAt(eol - 1) === CR ? eol - 1 : eol;
      if (stop <= from) break; // the empty line
      const colon = head.indexOf(':', from);
      if (colon < 0 || colon > stop || colon === from) throw new InvalidResponse('a header line without a name');
      const nameLength = colon - from;
      // only the names that frame the answer or keep the connection are read
      if (nameLength === 14 || nameLength === 17 || nameLength === 10) {
        const name = head.slice(from, colon).toLowerCase();
        const value = head.slice(colon + 1, stop).trim();
        if (name === 'content-length') {
          for (const part of value.split(',')) {
            const v = part.trim();
            if (!/^\d{1,15}$/.test(v)) throw new InvalidResponse('an invalid Content-Length');
            const n = Number(v);
            if (length >= 0 && n !== length) throw new InvalidResponse('two Content-Length values');
            length = n;
          }
        } else if (name === 'transfer-encoding') {
          encoded = true;
          const codings = value.toLowerCase().split(',');
          chunked = codings[codings.length - 1].trim() === 'chunked';
        } else if (name === 'connection') {
          for (const t of value.toLowerCase().split(',')) {
            const token = t.trim();
            if (token === 'close') close = true;
            else if (token === 'keep-alive' && minor === 0) close = false;
          }
        } else if (name === 'keep-alive') {
          const m = /(?:^|[\s,])timeout\s*=\s*(\d+)/i.exec(value);
          if (m) hint = Number(m[1]) * 1000;
        }
      }
      from = eol + 1;
    }
    if (status < 200) {
      // 101 answers an upgrade nobody asked for; the other 1xx come before the answer
      if (status === 101) throw new InvalidResponse('an upgrade was not asked for');
      return;
    }
    this.status = status;
    this.head = head;
    this.keepAliveHintMs = hint;
    this.keepAlive = !close;
    if (status === 204 || status === 304) this.stage = Stage.Done;
    else if (encoded) {
      // a body in another coding than chunked runs until close (RFC 9112 6.3)
      if (chunked) this.stage = Stage.ChunkSize;
      else {
        this.stage = Stage.UntilClose;
        this.keepAlive = false;
      }
    } else if (length >= 0) {
      this.left = length;
      this.stage = length === 0 ? Stage.Done : Stage.Length;
    } else {
      this.stage = Stage.UntilClose;
      this.keepAlive = false;
    }
  }

  /** A chunk-size line from `at`: the index after it (and the next stage set), or -1 for more bytes. */
  private readChunkSize(chunk: Buffer, at: number): number {
    const lf = chunk.indexOf(LF, at);
    if (lf < 0) {
      const piece = chunk.subarray(at);
      this.partial = this.partial ? Buffer.concat([this.partial, piece]) : Buffer.from(piece);
      if (this.partial.length > MAX_CHUNK_LINE) throw new InvalidResponse('a chunk-size line too long');
      return -1;
    }
    let line = chunk.toString('latin1', at, lf);
    if (this.partial) {
      line = this.partial.toString('latin1') + line;
      this.partial = null;
    }
    if (line.length > MAX_CHUNK_LINE) throw new InvalidResponse('a chunk-size line too long');
    const semi = line.indexOf(';');
    const hex = (semi >= 0 ? line.slice(0, semi) : line).trim();
    if (!/^[0-9a-fA-F]{1,12}$/.test(hex)) throw new InvalidResponse('an invalid chunk size');
    const size = parseInt(hex, 16);
    if (size === 0) {
      this.stage = Stage.Trailers;
      this.trailerBytes = 0;
    } else {
      this.left = size;
      this.stage = Stage.ChunkData;
    }
    return lf + 1;
  }

  /** Trailer lines after the last chunk, up to an empty line: the index after it, or -1 for more bytes. */
  private readTrailers(chunk: Buffer, at: number): number {
    let i = at;
    for (;;) {
      const lf = chunk.indexOf(LF, i);
      if (lf < 0) {
        const piece = chunk.subarray(i);
        this.trailerBytes += piece.length;
        if (this.trailerBytes > MAX_HEAD_BYTES) throw new InvalidResponse('trailers too large');
        // only whether the line so far is empty matters: keep its bytes
        this.partial = this.partial ? Buffer.concat([this.partial, piece]) : Buffer.from(piece);
        return -1;
      }
      const lineBytes = (this.partial ? this.partial.length : 0) + (lf - i);
      const empty = lineBytes === 0 || (lineBytes === 1 && (lf > i ? chunk[lf - 1] === CR : this.partial![0] === CR));
      this.partial = null;
      this.trailerBytes += lf + 1 - i;
      if (this.trailerBytes > MAX_HEAD_BYTES) throw new InvalidResponse('trailers too large');
      i = lf + 1;
      if (empty) return i;
    }
  }
}
