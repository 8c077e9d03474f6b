// The deliverer's HTTP/1.1 transport (src/delivery/http1.ts, http1-response.ts): how an answer is
// framed, read in every split a socket may deliver it in; and the connection pool against real
// receivers on 127.0.0.1 that answer byte for byte what a test writes (TCP and TLS).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { InvalidResponse, ResponseReader } from '../../src/delivery/http1-response.ts';
import { Http1Pool, KEEP_ALIVE_MARGIN_MS, PoolDestroyed, ReceiverClosed, type ExchangeHandler } from '../../src/delivery/http1.ts';
import { describeError } from '../../src/delivery/attempt-errors.ts';
import { pause, waitFor } from '../helpers/wait.ts';

// ------------------------------------------------------------------ the reader

interface Read {
  status: number;
  body: number;
  /** where the answer ended in the whole input, -1 when it did not */
  end: number;
  keepAlive: boolean;
  hint: number | null;
}

/** Feed `raw` in pieces cut at `cuts`, as a socket may; then, if asked, the receiver closes. */
function read(raw: string, cuts: number[] = [], close = false): Read {
  const bytes = Buffer.from(raw, 'latin1');
  const r = new ResponseReader();
  let status = 0;
  let body = 0;
  let end = -1;
  let from = 0;
  for (const to of [...cuts, bytes.length]) {
    if (to <= from) continue;
    const at = r.feed(
      bytes.subarray(from, to),
      (s) => {
        expect(status, 'one final status').toBe(0);
        status = s;
      },
      (n) => (body += n),
    );
    if (at >= 0) {
      end = from + at;
      break;
    }
    from = to;
  }
  if (end < 0 && close && r.close()) end = bytes.length;
  return { status, body, end, keepAlive: r.keepAlive, hint: r.keepAliveHintMs };
}

/** The same answer read whole, and cut once at every byte, gives the same result. */
function readEverySplit(raw: string, close = false): Read {
  const whole = read(raw, [], close);
  for (let i = 1; i < raw.length; i++) expect(read(raw, [i], close), `cut at ${i}`).toEqual(whole);
  // and one byte at a time
  expect(
    read(
      raw,
      Array.from({ length: raw.length }, (_, i) => i + 1),
      close,
    ),
  ).toEqual(whole);
  return whole;
}

describe('reading an answer', () => {
  it('Content-Length: the body is counted and the answer ends after it; what follows is not its', () => {
    const raw = 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nKeep-Alive: timeout=5, max=100\r\n\r\nhello';
    expect(readEverySplit(raw)).toEqual({ status: 200, body: 5, end: raw.length, keepAlive: true, hint: 5000 });
    expect(read(`${raw}HTTP/1.1 200`)).toMatchObject({ end: raw.length });
  });

  it('chunked, with extensions and trailers; a bare LF ends lines too', () => {
    const raw =
      'HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n5;name=x\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n';
    expect(readEverySplit(raw)).toEqual({ status: 202, body: 15, end: raw.length, keepAlive: true, hint: null });
    const lf = 'HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n';
    expect(readEverySplit(lf)).toEqual({ status: 200, body: 3, end: lf.length, keepAlive: true, hint: null });
  });

  it('1xx answers are skipped; 204 and 304 have no body whatever their headers say', () => {
    const raw =
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok';
    expect(readEverySplit(raw)).toEqual({ status: 201, body: 2, end: raw.length, keepAlive: true, hint: null });
    const empty = 'HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n';
    expect(readEverySplit(empty)).toEqual({ status: 204, body: 0, end: empty.length, keepAlive: true, hint: null });
    const notModified = 'HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n';
    expect(read(notModified)).toMatchObject({ status: 304, end: notModified.length });
  });

  it('no length: the body runs until the receiver closes, and the connection is not kept', () => {
    const raw = 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end';
    expect(readEverySplit(raw, true)).toEqual({ status: 200, body: 13, end: raw.length, keepAlive: false, hint: null });
    // a coding other than chunked last: until close too
    expect(read('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxyz', [], true)).toMatchObject({ body: 3, keepAlive: false });
    // cut short: not ended
    expect(read('HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort', [], true)).toMatchObject({ end: -1 });
    expect(read('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab', [], true)).toMatchObject({ end: -1 });
  });

  it('keep-alive: HTTP/1.1 unless Connection: close; HTTP/1.0 only with Connection: keep-alive', () => {
    expect(read('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n').keepAlive).toBe(false);
    expect(read('HTTP/1.1 200 OK\r\nconnection: Keep-Alive, Close\r\ncontent-length: 0\r\n\r\n').keepAlive).toBe(false);
    expect(read('HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n').keepAlive).toBe(false);
    expect(read('HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n').keepAlive).toBe(true);
    // the same length twice is one length
    expect(read('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok')).toMatchObject({ body: 2, keepAlive: true });
  });

  it('an answer a client cannot frame is invalid (and says so as an attempt error)', () => {
    const invalid = [
      'HTTP/2 200\r\n\r\n',
      'HTTP/1.1 2000 OK\r\n\r\n',
      'HTTP/1.1 20 OK\r\n\r\n',
      'ICY 200 OK\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n',
      'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX',
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n',
      'HTTP/1.1 200 OK\r\nno colon here\r\n\r\n',
      `HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`,
    ];
    for (const raw of invalid) {
      let err: unknown = null;
      try {
        read(raw);
      } catch (e) {
        err = e;
      }
      expect(err, raw.slice(0, 60)).toBeInstanceOf(InvalidResponse);
      expect(describeError(err, 5000)).toBe('invalid HTTP response');
    }
    // a head that never ends is refused once it is too large, not kept growing
    const r = new ResponseReader();
    const noop = () => {};
    expect(r.feed(Buffer.from('HTTP/1.1 200 OK\r\n'), noop, noop)).toBe(-1);
    expect(() => r.feed(Buffer.alloc(17 * 1024, 'a'), noop, noop)).toThrow(InvalidResponse);
  });
});

// ------------------------------------------------------------------ the pool

/** A receiver that answers each request (read up to its body's end) with `answer(n)`, the n-th request of its connection from 0. */
interface RawReceiver {
  url: string;
  /** connections accepted so far */
  connections(): number;
  /** requests read so far, all connections */
  requests(): number;
  sockets: Set<net.Socket>;
  close(): Promise<void>;
}

type Answer = string | ((socket: net.Socket) => void) | null;

function serveRaw(answer: (n: number, conn: number) => Answer, opts: { tls?: { key: Buffer; cert: Buffer } } = {}): Promise<RawReceiver> {
  let conns = 0;
  let reqs = 0;
  const sockets = new Set<net.Socket>();
  const onSocket = (socket: net.Socket) => {
    const conn = conns++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buf = Buffer.alloc(0);
    let n = 0;
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const length = Number(/content-length: (\d+)/i.exec(buf.toString('latin1', 0, end))?.[1] ?? 0);
        if (buf.length < end + 4 + length) return;
        buf = buf.subarray(end + 4 + length);
        reqs++;
        const a = answer(n++, conn);
        if (typeof a === 'string') socket.write(a);
        else if (a) a(socket);
      }
    });
  };
  const server = opts.tls ? tls.createServer(opts.tls, onSocket) : net.createServer(onSocket);
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      resolve({
        url: `${opts.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
        connections: () => conns,
        requests: () => reqs,
        sockets,
        close: () =>
          new Promise((r) => {
            for (const s of sockets) s.destroy();
            server.close(() => r());
          }),
      });
    }),
  );
}

interface Heard {
  status?: number;
  body: number;
  end?: true;
  error?: Error;
}

/** A handler that records what it hears; `done` resolves at its end or error. */
function handler(): ExchangeHandler & { heard: Heard; done: Promise<Heard> } {
  let resolve!: (h: Heard) => void;
  const heard: Heard = { body: 0 };
  const done = new Promise<Heard>((r) => (resolve = r));
  return {
    heard,
    done,
    onStatus: (s) => (heard.status = s),
    onBody: (n) => (heard.body += n),
    onEnd: () => {
      heard.end = true;
      resolve(heard);
    },
    onError: (err) => {
      heard.error = err;
      resolve(heard);
    },
  };
}

const OK = 'HTTP/1.1 204 No Content\r\n\r\n';
const BODY = Buffer.from('{"id":"evt_1"}');

const open: Array<{ close(): unknown }> = [];
afterEach(async () => {
  for (const o of open.splice(0)) await o.close();
});

function pool(url: string, o: Partial<ConstructorParameters<typeof Http1Pool>[0]> = {}): Http1Pool {
  const p = new Http1Pool({ url: new URL(url), connect: {}, connections: null, keepAliveMs: 10_000, keepAliveMaxMs: 60_000, ...o });
  open.push({ close: () => p.destroy() });
  return p;
}

async function post(p: Http1Pool, lines = 'content-type: application/json\r\n'): Promise<Heard> {
  const h = handler();
  p.post('/hook?a=1', lines, BODY, h);
  return h.done;
}

describe('the connection pool', () => {
  it('writes one POST with the Host, the header lines and the exact body, and reuses the connection', async () => {
    let seen = '';
    const rx = await serveRaw(() => (s) => s.write(OK));
    open.push(rx);
    const wire = net.createServer(); // a spy: what the pool writes, byte for byte, through a proxy to rx
    const spied = new Set<net.Socket>();
    open.push({
      close: () =>
        new Promise((r) => {
          for (const c of spied) c.destroy();
          wire.close(() => r(undefined));
        }),
    });
    wire.on('connection', (c) => {
      spied.add(c);
      const up = net.connect(Number(new URL(rx.url).port), '127.0.0.1');
      c.on('data', (d) => {
        seen += d.toString('latin1');
        up.write(d);
      });
      up.on('data', (d) => c.write(d));
      c.on('error', () => {});
      up.on('error', () => {});
      c.on('close', () => up.destroy());
    });
    await new Promise<void>((r) => wire.listen(0, '127.0.0.1', () => r()));
    const port = (wire.address() as net.AddressInfo).port;
    const p = pool(`http://127.0.0.1:${port}`);
    expect(await post(p, 'x-one: 1\r\n')).toEqual({ status: 204, body: 0, end: true });
    expect(seen).toBe(
      `POST /hook?a=1 HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nx-one: 1\r\ncontent-length: ${BODY.length}\r\n\r\n${BODY.toString('latin1')}`,
    );
    expect(await post(p)).toMatchObject({ status: 204, end: true });
    expect(rx.connections()).toBe(1);
    expect(p.active).toBe(0);
  });

  it('a body that runs until close ends when the receiver closes; the next request opens another connection', async () => {
    const rx = await serveRaw(() => (s) => s.end('HTTP/1.1 200 OK\r\n\r\nall of it'));
    open.push(rx);
    const p = pool(rx.url);
    expect(await post(p)).toEqual({ status: 200, body: 9, end: true });
    expect(await post(p)).toEqual({ status: 200, body: 9, end: true });
    expect(rx.connections()).toBe(2);
  });

  it('is not reused after Connection: close, after bytes beyond the answer, or past the receiver keep-alive hint', async () => {
    const answers: Record<number, string> = {
      0: 'HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n',
      1: 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n', // an answer nobody asked for after it
      2: `HTTP/1.1 200 OK\r\nKeep-Alive: timeout=${KEEP_ALIVE_MARGIN_MS / 1000}\r\nContent-Length: 0\r\n\r\n`, // nothing left of the hint
      3: OK,
    };
    const rx = await serveRaw((_n, conn) => answers[conn] ?? OK);
    open.push(rx);
    const p = pool(rx.url);
    for (let i = 0; i < 4; i++) expect(await post(p)).toMatchObject({ status: i === 3 ? 204 : 200, end: true });
    expect(rx.connections()).toBe(4);
    expect(await post(p)).toMatchObject({ status: 204, end: true });
    expect(rx.connections()).toBe(4); // the fourth, a plain keep-alive answer, is reused
  });

  it('an idle connection is not reused after keepAliveMs', async () => {
    const rx = await serveRaw(() => OK);
    open.push(rx);
    const p = pool(rx.url, { keepAliveMs: 30 });
    await post(p);
    // 60 ms later on the clock the pool measures idle time with (performance.now()), past keepAliveMs
    const now = performance.now.bind(performance);
    const skew = vi.spyOn(performance, 'now').mockImplementation(() => now() + 60);
    try {
      await post(p);
    } finally {
      skew.mockRestore();
    }
    expect(rx.connections()).toBe(2);
  });

  it('a connection closed before the answer ends fails the request: connection closed by receiver', async () => {
    const rx = await serveRaw((n) => (n === 0 ? (s) => s.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc') : null));
    open.push(rx);
    const p = pool(rx.url);
    const h = await post(p);
    expect(h.status).toBe(200);
    expect(h.error).toBeInstanceOf(ReceiverClosed);
    expect(describeError(h.error, 5000)).toBe('connection closed by receiver');
    // a receiver that closes without a word
    const silent = await serveRaw(() => (s) => s.destroy());
    open.push(silent);
    const e = await post(pool(silent.url));
    expect(describeError(e.error, 5000)).toMatch(/^connection (closed by receiver|reset)$/);
    expect(p.active).toBe(0);
  });

  it('an idle connection the receiver closes is dropped; a request after it opens a new one', async () => {
    const rx = await serveRaw(() => OK);
    open.push(rx);
    const p = pool(rx.url);
    await post(p);
    for (const s of rx.sockets) s.end();
    await waitFor(() => rx.sockets.size === 0, 2000, 'the receiver closed its side');
    await new Promise((r) => setImmediate(r));
    expect(await post(p)).toMatchObject({ status: 204, end: true });
    expect(rx.connections()).toBe(2);
  });

  it('bytes on an idle connection drop it (its framing is lost)', async () => {
    const rx = await serveRaw(() => OK);
    open.push(rx);
    const p = pool(rx.url);
    await post(p);
    for (const s of rx.sockets) s.write('HTTP/1.1 200 OK\r\n\r\n');
    await waitFor(() => rx.sockets.size === 0, 2000, 'the pool dropped the connection');
    expect(await post(p)).toMatchObject({ status: 204, end: true });
    expect(rx.connections()).toBe(2);
  });

  it('at most `connections` at once: the rest wait, first come first served, for one to be free', async () => {
    const held: net.Socket[] = [];
    const rx = await serveRaw(() => (s) => held.push(s));
    open.push(rx);
    const p = pool(rx.url, { connections: 2 });
    const hs = Array.from({ length: 5 }, () => handler());
    for (const h of hs) p.post('/', '', BODY, h);
    await waitFor(() => held.length === 2, 2000, 'two requests at the receiver');
    expect(rx.connections()).toBe(2);
    expect(p.active).toBe(5);
    // the second waiting request is given up: it is never sent
    const aborted = handler();
    p.post('/', '', BODY, aborted).abort();
    for (let i = 0; i < 5; i++) {
      held.shift()!.write(OK);
      await hs[i].done;
      if (i < 3) await waitFor(() => held.length >= 1, 2000, 'the next request on the freed connection');
    }
    expect(hs.map((h) => h.heard.status)).toEqual([204, 204, 204, 204, 204]);
    expect(aborted.heard).toEqual({ body: 0 });
    expect(rx.connections()).toBe(2);
    expect(rx.requests()).toBe(5);
    expect(p.active).toBe(0);
  });

  it('an answer read in pieces, with another connection read in between, is read right (the read buffer is shared)', async () => {
    const held: net.Socket[] = [];
    const rx = await serveRaw(() => (s) => held.push(s));
    open.push(rx);
    const p = pool(rx.url);
    const a = handler();
    const b = handler();
    p.post('/', '', BODY, a);
    p.post('/', '', BODY, b);
    await waitFor(() => held.length === 2, 2000, 'both requests at the receiver');
    const [sa, sb] = held;
    const answerA = 'HTTP/1.1 201 Created\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n';
    // each piece is read on its own: the pool has fed it to its reader before the next is written
    const feeds = vi.spyOn(ResponseReader.prototype, 'feed');
    try {
      sa.write(answerA.slice(0, 20)); // a piece of A's head
      await waitFor(() => feeds.mock.calls.length === 1, 2000, "A's first piece read");
      sb.write('HTTP/1.1 202 Accepted\r\nContent-Length: 3\r\n\r\nxyz');
      await b.done;
      const fed = feeds.mock.calls.length;
      sa.write(answerA.slice(20, 60)); // the rest of the head and a piece of a chunk line
      await waitFor(() => feeds.mock.calls.length > fed, 2000, "A's second piece read");
      sa.write(answerA.slice(60));
      expect(await a.done).toEqual({ status: 201, body: 4, end: true });
      expect(b.heard).toEqual({ status: 202, body: 3, end: true });
    } finally {
      feeds.mockRestore();
    }
  });

  it('abort() of a request under way drops its connection and nothing more is heard', async () => {
    const rx = await serveRaw(() => null);
    open.push(rx);
    const p = pool(rx.url);
    const h = handler();
    const x = p.post('/', '', BODY, h);
    await waitFor(() => rx.requests() === 1, 2000, 'the request at the receiver');
    x.abort();
    await waitFor(() => rx.sockets.size === 0, 2000, 'the connection dropped');
    expect(h.heard).toEqual({ body: 0 });
    expect(p.active).toBe(0);
  });

  it('destroy() fails what is under way; close() waits for it first', async () => {
    const held: net.Socket[] = [];
    const rx = await serveRaw(() => (s) => held.push(s));
    open.push(rx);
    const a = pool(rx.url);
    const h = handler();
    a.post('/', '', BODY, h);
    await waitFor(() => held.length === 1, 2000, 'a request under way');
    a.destroy();
    expect((await h.done).error).toBeDefined();
    const b = pool(rx.url);
    const g = handler();
    b.post('/', '', BODY, g);
    await waitFor(() => held.length === 2, 2000, 'another under way');
    let closed = false;
    const closing = b.close().then(() => (closed = true));
    await pause(20, 'a negative: nothing to wait for, close() must still be waiting for the request under way');
    expect(closed).toBe(false);
    held[1].write(OK);
    await closing;
    expect((await g.done).status).toBe(204);
    const late = handler();
    b.post('/', '', BODY, late);
    expect((await late.done).error).toBeInstanceOf(PoolDestroyed);
  });

  it('HTTPS: the receiver certificate is checked (a self-signed one is refused), and a trusted one is delivered to', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-tls-'));
    const key = path.join(dir, 'key.pem');
    const cert = path.join(dir, 'cert.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    const creds = { key: readFileSync(key), cert: readFileSync(cert) };
    const rx = await serveRaw(() => OK, { tls: creds });
    open.push(rx);
    const refused = await post(pool(rx.url));
    expect(describeError(refused.error, 5000)).toMatch(/^tls error \((DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN)\)$/);
    const p = pool(rx.url, { connect: { ca: creds.cert } });
    expect(await post(p)).toEqual({ status: 204, body: 0, end: true });
    expect(await post(p)).toEqual({ status: 204, body: 0, end: true });
    expect(rx.connections()).toBe(1); // one reused (the refused handshake never became a connection of the receiver's)
  });
});
