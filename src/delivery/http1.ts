// One origin's keep-alive connections for webhook attempts (the deliverer's transport,
// src/delivery/client.ts): HTTP/1.1, one POST at a time on a connection, the answer read to its end
// and discarded (http1-response.ts), the connection then reused for the next attempt.
//
// Why not undici, which svc used until issue 33: an attempt needs one request written in one
// socket write and an answer read for its status and its end, nothing more. undici's general
// client (request objects, header validation, its WASM parser, dispatcher layers, diagnostics)
// cost 38 µs of CPU per POST against 22 µs for this exchange on the same receiver (BENCHMARKS.md,
// issue 33 step 13), and per delivery that was most of what svc spent above its floor.
//
//   post() ─▶ an idle connection (the most recently used that may still be reused)
//          ─▶ else a new one, up to `connections` (null: no cap; the deliverer's slots bound attempts)
//          ─▶ else it waits, first come first served, for one to be free
//
// A connection is reused only when its answer ended cleanly with keep-alive, and no longer than the
// receiver's `Keep-Alive: timeout` hint less KEEP_ALIVE_MARGIN_MS (a receiver closes an idle
// connection after that: a request written as it does would be lost), else keepAliveMs. Timeouts
// are the caller's (abort()); this module has no timers.
import net from 'node:net';
import tls from 'node:tls';
import { Fifo } from '../domain/fifo.ts';
import { ResponseReader } from './http1-response.ts';

export { InvalidResponse } from './http1-response.ts';

/** What plain connections read into (one per thread: reads are handled one at a time, and copied where kept). */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

/** A connection is not reused this close to the end of the receiver's keep-alive hint (undici's threshold too). */
export const KEEP_ALIVE_MARGIN_MS = 2000;

/** The connection closed before the answer ended (RFC 9112 9.6: the receiver may close an idle connection at any time). */
export class ReceiverClosed extends Error {
  override readonly name = 'ReceiverClosed';
  readonly code = 'ERR_RECEIVER_CLOSED';
  constructor() {
    super('connection closed by receiver');
  }
}

/** The pool was destroyed with the exchange still under way. */
export class PoolDestroyed extends Error {
  override readonly name = 'PoolDestroyed';
  readonly code = 'ERR_POOL_DESTROYED';
}

/** What hears how an exchange goes. Never called after abort(), nor after onEnd or onError. */
export interface ExchangeHandler {
  /** the answer's final status (after any 1xx), and its status line and headers as read */
  onStatus(status: number, head: string): void;
  /** body bytes read: how many, at chunk[start, start + bytes) (valid only during the call: copy what is kept) */
  onBody(bytes: number, chunk: Buffer, start: number): void;
  /** the answer ended */
  onEnd(): void;
  onError(err: Error): void;
}

/** One request under way: abort() stops it (its connection, if it has one, is dropped) and nothing more is heard. */
export interface Exchange {
  abort(): void;
}

export interface ConnectOptions {
  /** name resolution pinned to vetted addresses (src/delivery/guard.ts pinnedLookup) */
  lookup?: net.LookupFunction;
  /** the TLS server name (a host name, not an IP literal) */
  servername?: string;
  /** certificates trusted beside the system's (tests: a receiver's own) */
  ca?: string | Buffer;
}

export interface Http1PoolOptions {
  /** the origin (its protocol, host name and port); the Host header is its host */
  url: URL;
  connect: ConnectOptions;
  /** connections at most (null: as many as requests at once) */
  connections: number | null;
  /** how long an idle connection is reused when the receiver gives no keep-alive hint (ms) */
  keepAliveMs: number;
  /** how long at most, whatever the hint (ms) */
  keepAliveMaxMs: number;
}

/** A request: waiting for a connection, or on one. */
class Request implements Exchange {
  conn: Connection | null = null;
  over = false;
  constructor(
    readonly pool: Http1Pool,
    readonly head: string,
    public body: Buffer | null,
    public handler: ExchangeHandler | null,
  ) {}

  abort(): void {
    if (this.over) return;
    const conn = this.conn;
    this.pool.over(this);
    if (conn) conn.drop();
  }
}

class Connection {
  readonly socket: net.Socket;
  private readonly reader = new ResponseReader();
  current: Request | null = null;
  /** reused until (performance.now() ms) */
  reuseUntil = 0;
  /** no more requests: the receiver ended it, or it is being dropped */
  ending = false;
  private error: Error | null = null;

  constructor(private readonly pool: Http1Pool) {
    // plain TCP reads into the thread's one read buffer (no Buffer, no stream machinery per read)
    this.socket = pool.open((n, buf) => {
      this.onData(buf.subarray(0, n));
      return true;
    });
    if (pool.https) this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('end', () => {
      this.ending = true;
      this.pool.unidle(this);
    });
    this.socket.on('error', (err: Error) => {
      this.error ??= err;
    });
    this.socket.on('close', () => this.onClose());
  }

  /** Write a request (the socket buffers it while it connects): one socket write for head and body. */
  start(r: Request): void {
    this.current = r;
    r.conn = this;
    this.reader.reset();
    const s = this.socket;
    s.cork();
    s.write(r.head, 'latin1');
    s.write(r.body as Buffer);
    s.uncork();
    r.body = null;
  }

  drop(): void {
    this.ending = true;
    this.current = null;
    this.socket.destroy();
  }

  /** Drop the connection; its request under way, if any, fails with err. */
  dropWith(err: Error): void {
    const r = this.current;
    if (r && !r.over) this.fail(r, err);
    else this.drop();
  }

  private onData(chunk: Buffer): void {
    const r = this.current;
    if (!r) {
      // bytes nobody asked for: the connection's framing cannot be trusted any more
      this.drop();
      return;
    }
    let end: number;
    try {
      end = this.reader.feed(
        chunk,
        (status, head) => r.handler?.onStatus(status, head),
        (bytes, buf, start) => r.handler?.onBody(bytes, buf, start),
      );
    } catch (err) {
      this.fail(r, err as Error);
      return;
    }
    if (end < 0 || r.over) return; // more to read, or aborted meanwhile (the connection is dropped)
    this.current = null;
    const handler = r.handler as ExchangeHandler;
    const hint = this.reader.keepAliveHintMs;
    const reuseFor = hint === null ? this.pool.o.keepAliveMs : Math.min(hint - KEEP_ALIVE_MARGIN_MS, this.pool.o.keepAliveMaxMs);
    // bytes after the answer were not asked for: the connection is not reused
    if (this.reader.keepAlive && end === chunk.length && !this.ending && reuseFor > 0) {
      this.reuseUntil = performance.now() + reuseFor;
      this.pool.over(r);
      this.pool.free(this);
    } else {
      this.pool.over(r);
      this.drop();
    }
    handler.onEnd();
  }

  private fail(r: Request, err: Error): void {
    const handler = r.handler;
    this.pool.over(r);
    this.drop();
    handler?.onError(err);
  }

  private onClose(): void {
    this.ending = true;
    this.pool.closed(this);
    const r = this.current;
    this.current = null;
    if (!r || r.over) return;
    const handler = r.handler as ExchangeHandler;
    if (this.reader.close()) {
      // an answer whose body ran until the receiver closed
      this.pool.over(r);
      handler.onEnd();
      return;
    }
    this.pool.over(r);
    handler.onError(this.error ?? new ReceiverClosed());
  }
}

export class Http1Pool {
  /** idle connections, the most recently used last */
  private readonly idle: Connection[] = [];
  private readonly all = new Set<Connection>();
  private readonly waiting = new Fifo<Request>();
  /** requests not yet over */
  private pending = 0;
  private closing = false;
  private drained: Array<() => void> = [];
  private readonly host: string;
  readonly https: boolean;
  private session: Buffer | undefined;

  constructor(readonly o: Http1PoolOptions) {
    this.https = o.url.protocol === 'https:';
    this.host = o.url.host;
  }

  /** Requests not yet over (waiting for a connection or on one). */
  get active(): number {
    return this.pending;
  }

  /**
   * POST body to path with these header lines (`name: value\r\n` each; the Host and Content-Length
   * are added here). The handler hears the answer, never from within this call.
   */
  post(path: string, headerLines: string, body: Buffer, handler: ExchangeHandler): Exchange {
    const r = new Request(
      this,
      `POST ${path} HTTP/1.1\r\nhost: ${this.host}\r\n${headerLines}content-length: ${body.length}\r\n\r\n`,
      body,
      handler,
    );
    this.pending++;
    if (this.closing) {
      this.over(r);
      queueMicrotask(() => handler.onError(new PoolDestroyed('connection pool closed')));
      return r;
    }
    const conn = this.takeIdle();
    if (conn) conn.start(r);
    else if (this.o.connections === null || this.all.size < this.o.connections) this.connect().start(r);
    else this.waiting.push(r);
    return r;
  }

  /** Stop taking requests; once the ones under way are over, close every connection. */
  async close(): Promise<void> {
    this.closing = true;
    for (const c of this.idle.splice(0)) c.drop();
    if (this.pending > 0) await new Promise<void>((r) => this.drained.push(r));
    this.destroy();
  }

  /** Drop every connection; requests still under way fail. */
  destroy(): void {
    this.closing = true;
    for (let r = this.waiting.shift(); r; r = this.waiting.shift()) {
      if (r.over) continue;
      const handler = r.handler;
      this.over(r);
      handler?.onError(new PoolDestroyed('connection pool destroyed'));
    }
    for (const c of [...this.all]) c.dropWith(new PoolDestroyed('connection pool destroyed'));
  }

  // ---- for Connection and Request

  /**
   * A new socket to the origin (TLS for https), with the pinned lookup. A plain one hands what it
   * reads to `onRead` in READ_BUFFER, shared by every connection of this thread: the bytes must be
   * used (or copied) before onRead returns.
   */
  open(onRead: (n: number, buf: Buffer) => boolean): net.Socket {
    const u = this.o.url;
    const port = Number(u.port) || (this.https ? 443 : 80);
    const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
    const common = { host, port, lookup: this.o.connect.lookup, noDelay: true, keepAlive: true, keepAliveInitialDelay: 60_000 };
    if (!this.https) return net.connect({ ...common, onread: { buffer: READ_BUFFER, callback: onRead } });
    const s = tls.connect({
      ...common,
      servername: this.o.connect.servername,
      ca: this.o.connect.ca,
      ALPNProtocols: ['http/1.1'],
      session: this.session,
    });
    s.on('session', (session: Buffer) => (this.session = session));
    return s;
  }

  /** A request is over (answered, failed or aborted): it lets go of its body and handler. */
  over(r: Request): void {
    if (r.over) return;
    r.over = true;
    r.handler = null;
    r.body = null;
    r.conn = null;
    if (--this.pending === 0 && this.drained.length) {
      const d = this.drained;
      this.drained = [];
      for (const f of d) f();
    }
  }

  /** A connection whose answer ended and may be reused: the next waiting request, or idle. */
  free(c: Connection): void {
    if (this.closing) {
      c.drop();
      return;
    }
    const next = this.nextWaiting();
    if (next) c.start(next);
    else this.idle.push(c);
  }

  /** A connection is not to be reused (the receiver ended it). */
  unidle(c: Connection): void {
    const i = this.idle.lastIndexOf(c);
    if (i >= 0) this.idle.splice(i, 1);
  }

  /** A connection closed: out of the pool; a waiting request gets a new connection in its place. */
  closed(c: Connection): void {
    if (!this.all.delete(c)) return;
    this.unidle(c);
    if (this.closing) return;
    const next = this.nextWaiting();
    if (next) this.connect().start(next);
  }

  private connect(): Connection {
    const c = new Connection(this);
    this.all.add(c);
    return c;
  }

  private takeIdle(): Connection | null {
    const now = performance.now();
    for (let c = this.idle.pop(); c; c = this.idle.pop()) {
      if (!c.ending && now < c.reuseUntil) return c;
      c.drop();
    }
    return null;
  }

  private nextWaiting(): Request | null {
    for (let r = this.waiting.shift(); r; r = this.waiting.shift()) if (!r.over) return r;
    return null;
  }
}
