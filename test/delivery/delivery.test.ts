// Outgoing webhook delivery against real HTTP receivers on 127.0.0.1 (spec 5, 6.1, 8; CONTRACT 6.4, 6.5).
import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import pino from 'pino';
import { Http1Pool, type ExchangeHandler } from '../../src/delivery/http1.ts';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CE_CONTENT_TYPE, type AttemptResult, type DelivererOptions } from '../../src/delivery/client.ts';
import { verify } from '../../src/delivery/signing.ts';
import { testDeliverer, type TestDeliverer } from '../helpers/deliverer.ts';
import { DeliveryStatusBook } from '../../src/outcomes/status-book.ts';
import { systemClock } from '../../src/domain/clock.ts';
import { ManualClock } from '../helpers/clock.ts';
import { waitFor } from '../helpers/service.ts';
import { later } from '../helpers/wait.ts';
import { openDb } from '../../store/db.ts';
import { createMetrics, renderMetrics, type Metrics } from '../../src/metrics.ts';

// ------------------------------------------------------------------ a recording receiver

interface Rec {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  socketId: number;
  t: number;
}
type Behaviour =
  | { status?: number; body?: string; delayMs?: number }
  | { hang: true }
  | { redirect: string; status?: number }
  | { bodyBytes: number }
  | { trickle: { chunk: number; everyMs: number; totalBytes: number } };

async function startReceiver() {
  const requests: Rec[] = [];
  const behaviours = new Map<string, Behaviour>();
  const sockets = new Set<Socket>();
  const socketIds = new WeakMap<Socket, number>();
  const open = new Set<http.ServerResponse>();
  const timers = new Set<NodeJS.Timeout>();
  let nextSocket = 0;
  let connections = 0;
  let bytesWritten = 0;
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      requests.push({
        method: req.method ?? '',
        path,
        headers: req.headers,
        raw: Buffer.concat(chunks),
        socketId: socketIds.get(req.socket) ?? -1,
        t: Date.now(),
      });
      const b = behaviours.get(path) ?? {};
      if ('hang' in b) {
        open.add(res);
        res.on('close', () => open.delete(res));
        return;
      }
      if ('redirect' in b) {
        res.writeHead(b.status ?? 302, { location: b.redirect });
        return void res.end();
      }
      if ('bodyBytes' in b) {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': b.bodyBytes });
        bytesWritten += b.bodyBytes;
        return void res.end(Buffer.alloc(b.bodyBytes, 'y'));
      }
      if ('trickle' in b) {
        res.writeHead(200, { 'content-type': 'text/plain' });
        open.add(res);
        let sent = 0;
        const iv = setInterval(() => {
          if (res.destroyed || sent >= b.trickle.totalBytes) {
            clearInterval(iv);
            open.delete(res);
            if (!res.destroyed) res.end();
            return;
          }
          res.write(Buffer.alloc(b.trickle.chunk, 'x'));
          sent += b.trickle.chunk;
          bytesWritten += b.trickle.chunk;
        }, b.trickle.everyMs);
        timers.add(iv);
        res.on('close', () => {
          clearInterval(iv);
          open.delete(res);
        });
        return;
      }
      const send = () => {
        res.writeHead(b.status ?? 200, { 'content-type': 'text/plain' });
        res.end(b.body ?? 'ok');
      };
      if (b.delayMs) timers.add(later(b.delayMs, send, 'a receiver that holds its answer, as a test asked'));
      else send();
    });
  });
  server.on('connection', (s) => {
    connections++;
    socketIds.set(s, nextSocket++);
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  return {
    port,
    url,
    requests,
    hook: (name: string) => `${url}/h/${name}`,
    set: (name: string, b: Behaviour) => behaviours.set(`/h/${name}`, b),
    at: (name: string) => requests.filter((r) => r.path === `/h/${name}`),
    connections: () => connections,
    /** whether the connection a request came on is still open (a client closing its pool shows here) */
    socketOpen: (id: number) => [...sockets].some((sk) => socketIds.get(sk) === id),
    /**
     * A request on a new connection, answered: the server accepts connections in order, so a
     * connection opened before this one has been counted when it resolves.
     */
    barrier: () =>
      new Promise<void>((resolve, reject) => {
        http.get(`${url}/h/barrier`, { agent: false }, (res) => res.resume().on('end', resolve)).on('error', reject);
      }),
    bytesWritten: () => bytesWritten,
    openResponses: () => open.size,
    async close() {
      for (const t of timers) clearTimeout(t);
      for (const r of open) r.destroy();
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
type Receiver = Awaited<ReturnType<typeof startReceiver>>;

// ------------------------------------------------------------------ helpers

const hmacHex = (secret: string, raw: Buffer | string) => createHmac('sha256', secret).update(raw).digest('hex');

const made: TestDeliverer[] = [];
function deliverer(over: Partial<DelivererOptions> = {}) {
  const d = testDeliverer(over);
  made.push(d);
  return { d };
}

async function counter(m: Metrics, name: string, labels: Record<string, string> = {}) {
  const { body } = await renderMetrics(m);
  let sum = 0;
  let found = false;
  for (const line of body.split('\n')) {
    const mm = /^([a-z_]+)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!mm || mm[1] !== name) continue;
    const ls = Object.fromEntries([...(mm[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => ls[k] === v)) {
      sum += Number(mm[3]);
      found = true;
    }
  }
  return found ? sum : undefined;
}

let rx: Receiver;
beforeAll(async () => {
  rx = await startReceiver();
});
afterEach(async () => {
  await Promise.all(made.splice(0).map((d) => d.close(0)));
});
afterAll(async () => {
  await rx.close();
});

const EVENT = JSON.stringify({ specversion: '1.0', id: 'ev_1', type: 'com.svc.webhook.ping.v1', data: { note: 'héllo ✓ — ünïcödé' } });

// ------------------------------------------------------------------ tests

describe('request shape and signature', () => {
  it('POSTs the exact body with the CloudEvents content type and a lowercase hex HMAC of the body bytes', async () => {
    const { d } = deliverer();
    const secret = 'whsec_test_0123456789';
    const r = await d.deliver({ url: `${rx.hook('signed')}?q=1`, secret }, EVENT);
    expect(r).toMatchObject({ delivered: true, status: 200 });
    expect(r.error).toBeUndefined();
    expect(Number.isInteger(r.duration_ms)).toBe(true);
    const [rec] = rx.at('signed');
    expect(rec.method).toBe('POST');
    expect(rec.headers['content-type']).toBe(CE_CONTENT_TYPE);
    expect(rec.raw.equals(Buffer.from(EVENT, 'utf8'))).toBe(true);
    const sig = rec.headers['x-svc-signature'] as string;
    expect(sig).toMatch(/^[0-9a-f]{64}$/);
    expect(sig).toBe(hmacHex(secret, rec.raw));
    expect(verify(secret, rec.raw, sig)).toBe(true);
    expect(verify('other', rec.raw, sig)).toBe(false);
    expect(Number(rec.headers['content-length'])).toBe(Buffer.byteLength(EVENT));
  });

  it('signs the exact bytes of a Buffer body too', async () => {
    const { d } = deliverer();
    const buf = Buffer.from('{"a":"\u00e9"}\n', 'utf8');
    await d.deliver({ url: rx.hook('signed-buf'), secret: 's' }, buf);
    const [rec] = rx.at('signed-buf');
    expect(rec.raw.equals(buf)).toBe(true);
    expect(rec.headers['x-svc-signature']).toBe(hmacHex('s', buf));
  });

  it('sends no signature header without a secret', async () => {
    const { d } = deliverer();
    expect((await d.deliver({ url: rx.hook('plain'), secret: null }, EVENT)).delivered).toBe(true);
    expect((await d.deliver({ url: rx.hook('plain'), secret: '' }, EVENT)).delivered).toBe(true);
    for (const rec of rx.at('plain')) expect(rec.headers['x-svc-signature']).toBeUndefined();
    expect(rx.at('plain')).toHaveLength(2);
  });
});

describe('failures: exactly one attempt each', () => {
  it.each([500, 401, 404, 503])('HTTP %i is a failure with its status, no retry', async (code) => {
    const { d } = deliverer();
    rx.set(`e${code}`, { status: code });
    const r = await d.deliver({ url: rx.hook(`e${code}`), secret: 'x' }, EVENT);
    expect(r).toMatchObject({ delivered: false, status: code, error: `HTTP ${code}` });
    // nothing left running, and once closed the deliverer sends nothing more: a retry would show now
    expect(d.inFlight()).toBe(0);
    await d.close();
    expect(rx.at(`e${code}`)).toHaveLength(1);
  });

  it('any 2xx is a success', async () => {
    const { d } = deliverer();
    rx.set('e204', { status: 204, body: '' });
    rx.set('e299', { status: 299 });
    expect(await d.deliver({ url: rx.hook('e204'), secret: null }, EVENT)).toMatchObject({ delivered: true, status: 204 });
    expect(await d.deliver({ url: rx.hook('e299'), secret: null }, EVENT)).toMatchObject({ delivered: true, status: 299 });
  });

  it('does not follow redirects: a 3xx is a failure with that status and the target is never contacted', async () => {
    const { d } = deliverer();
    rx.set('redir', { redirect: rx.hook('redir-target'), status: 302 });
    rx.set('redir307', { redirect: rx.hook('redir-target'), status: 307 });
    expect(await d.deliver({ url: rx.hook('redir'), secret: null }, EVENT)).toMatchObject({
      delivered: false,
      status: 302,
      error: 'HTTP 302',
    });
    expect(await d.deliver({ url: rx.hook('redir307'), secret: null }, EVENT)).toMatchObject({ delivered: false, status: 307 });
    expect(d.inFlight()).toBe(0);
    await d.close(); // nothing more can be sent
    expect(rx.at('redir-target')).toHaveLength(0);
    expect(rx.at('redir')).toHaveLength(1);
  });

  it('reports connection refused', async () => {
    const srv = http.createServer();
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    const port = (srv.address() as AddressInfo).port;
    await new Promise<void>((r) => srv.close(() => r()));
    const { d } = deliverer();
    const r = await d.deliver({ url: `http://127.0.0.1:${port}/x`, secret: null }, EVENT);
    expect(r).toMatchObject({ delivered: false, error: 'connection refused' });
    expect(r.status).toBeUndefined();
  });

  it('reports an unresolvable host without throwing', async () => {
    const { d } = deliverer({ lookup: async () => Promise.reject(Object.assign(new Error('nope'), { code: 'ENOTFOUND' })) });
    const r = await d.deliver({ url: 'https://nowhere.invalid/x', secret: null }, EVENT);
    expect(r).toMatchObject({ delivered: false, error: 'dns lookup failed (ENOTFOUND)' });
  });

  it('reports an invalid URL without throwing', async () => {
    const { d } = deliverer();
    expect(await d.deliver({ url: 'not a url', secret: null }, EVENT)).toMatchObject({ delivered: false, error: 'invalid url' });
  });
});

describe('timeouts and large answers', () => {
  it('a hanging receiver times out at the configured timeout while a healthy one is delivered at once', async () => {
    const { d } = deliverer({ timeoutMs: 300 });
    rx.set('hang', { hang: true });
    const t0 = Date.now();
    let fastAt = 0;
    const [hang, fast] = await Promise.all([
      d.deliver({ url: rx.hook('hang'), secret: null }, EVENT),
      d.deliver({ url: rx.hook('fast'), secret: null }, EVENT).then((r) => {
        fastAt = Date.now() - t0;
        return r;
      }),
    ]);
    const took = Date.now() - t0;
    expect(fast.delivered).toBe(true);
    expect(fastAt).toBeLessThan(250);
    expect(hang).toMatchObject({ delivered: false, error: 'timeout after 300 ms' });
    expect(hang.duration_ms).toBeGreaterThanOrEqual(280);
    expect(hang.duration_ms).toBeLessThan(1000);
    expect(took).toBeLessThan(1000);
    expect(rx.at('hang')).toHaveLength(1);
  });

  it(
    'each attempt times out timeoutMs after its own start, ' + 'attempts started together share one timer, and none is left behind',
    async () => {
      const clock = new ManualClock(Date.now());
      const { d } = deliverer({ timeoutMs: 5000, clock });
      rx.set('hang-shared', { hang: true });
      const outcomes: string[] = [];
      const track = (name: string) => (r: AttemptResult) => void outcomes.push(`${name}: ${r.error ?? 'delivered'}`);
      // three attempts in the same instant of the clock (one answered at once, leaving the group
      // from its middle), a fourth 1 s later
      const first = [
        d.deliver({ url: rx.hook('hang-shared'), secret: null }, EVENT).then(track('a')),
        d.deliver({ url: rx.hook('fast-shared'), secret: null }, EVENT).then(track('fast')),
        d.deliver({ url: rx.hook('hang-shared'), secret: null }, EVENT).then(track('b')),
      ];
      expect(clock.pending()).toBe(1);
      await waitFor(() => outcomes.length === 1, 5000, 'the fast attempt to be delivered');
      expect(outcomes).toEqual(['fast: delivered']);
      clock.advance(1000);
      const later = d.deliver({ url: rx.hook('hang-shared'), secret: null }, EVENT).then(track('c'));
      expect(clock.pending()).toBe(2);
      await waitFor(() => rx.at('hang-shared').length === 3, 5000, 'the three attempts to arrive');
      clock.advance(3999);
      await new Promise((r) => setImmediate(r));
      expect(outcomes).toHaveLength(1);
      clock.advance(1);
      await Promise.all(first);
      expect(outcomes.slice(1).sort()).toEqual(['a: timeout after 5000 ms', 'b: timeout after 5000 ms']);
      clock.advance(999);
      await new Promise((r) => setImmediate(r));
      expect(outcomes).toHaveLength(3);
      clock.advance(1);
      await later;
      expect(outcomes[3]).toBe('c: timeout after 5000 ms');
      // a fast answer cancels its group's timer: no timer is left once every attempt is over
      expect((await d.deliver({ url: rx.hook('fast-shared'), secret: null }, EVENT)).delivered).toBe(true);
      expect(clock.pending()).toBe(0);
    },
  );

  it('a slow but timely answer is delivered', async () => {
    const { d } = deliverer({ timeoutMs: 1000 });
    rx.set('slow', { delayMs: 400 });
    const r = await d.deliver({ url: rx.hook('slow'), secret: null }, EVENT);
    expect(r.delivered).toBe(true);
    expect(r.duration_ms).toBeGreaterThanOrEqual(380);
  });

  it('a huge answer is cut after 64 KiB', async () => {
    const { d } = deliverer({ timeoutMs: 2000 });
    rx.set('huge', { bodyBytes: 32 * 1024 * 1024 });
    const t0 = Date.now();
    const r = await d.deliver({ url: rx.hook('huge'), secret: null }, EVENT);
    expect(r).toMatchObject({ delivered: true, status: 200 });
    expect(Date.now() - t0).toBeLessThan(1500);
  });

  it('a trickling answer is cut at 64 KiB and does not stall', async () => {
    const { d } = deliverer({ timeoutMs: 3000 });
    rx.set('trickle', { trickle: { chunk: 4096, everyMs: 5, totalBytes: 64 * 1024 * 1024 } });
    const before = rx.bytesWritten();
    const r = await d.deliver({ url: rx.hook('trickle'), secret: null }, EVENT);
    expect(r).toMatchObject({ delivered: true, status: 200 });
    expect(r.duration_ms).toBeLessThan(2000);
    // the connection was dropped, so the receiver stops writing (it would go on for 64 MiB otherwise)
    await waitFor(() => rx.openResponses() === 0, 2000, 'the trickling response to be cut');
    expect(rx.bytesWritten() - before).toBeLessThan(4 * 1024 * 1024);
  });

  it('a body that trickles past the timeout fails at the timeout', async () => {
    const { d } = deliverer({ timeoutMs: 300 });
    rx.set('trickle-slow', { trickle: { chunk: 16, everyMs: 50, totalBytes: 1 << 20 } });
    const t0 = Date.now();
    const r = await d.deliver({ url: rx.hook('trickle-slow'), secret: null }, EVENT);
    expect(r).toMatchObject({ delivered: false, status: 200, error: 'timeout after 300 ms' });
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});

describe('target guard at delivery', () => {
  it.each([
    ['127.0.0.1', (p: number) => `http://127.0.0.1:${p}/h/guarded`, 'loopback'],
    ['::ffff:127.0.0.1', (p: number) => `http://[::ffff:127.0.0.1]:${p}/h/guarded`, 'loopback'],
    ['::ffff:7f00:1', (p: number) => `http://[::ffff:7f00:1]:${p}/h/guarded`, 'loopback'],
    ['localhost', (p: number) => `http://localhost:${p}/h/guarded`, 'loopback'],
    ['2130706433', (p: number) => `http://2130706433:${p}/h/guarded`, 'loopback'],
    ['169.254.169.254', () => 'http://169.254.169.254/latest/meta-data/', 'metadata'],
    ['10.0.0.1', () => 'http://10.0.0.1/h', 'private'],
    ['[::1]', (p: number) => `http://[::1]:${p}/h/guarded`, 'loopback'],
  ])('refuses %s when private targets are not allowed, without connecting', async (_name, mk, reason) => {
    const { d } = deliverer({ allowPrivateTargets: false });
    const conns = rx.connections();
    const url = `${mk(rx.port)}?token=SECRET_QUERY`;
    const r = await d.deliver({ url, secret: 'TOP_SECRET' }, EVENT);
    expect(r).toMatchObject({ delivered: false, error: `target refused: ${reason} address` });
    expect(r.status).toBeUndefined();
    await rx.barrier(); // a connection from the deliverer would be counted by now
    expect(rx.connections()).toBe(conns + 1);
    expect(rx.at('guarded')).toHaveLength(0);
    expect(d.d.hostOf(url)).not.toMatch(/SECRET_QUERY|guarded|meta-data/); // what failure logs name
  });

  it('refuses a name when any of its addresses is private', async () => {
    const { d } = deliverer({
      allowPrivateTargets: false,
      lookup: async () => [
        { address: '93.184.215.14', family: 4 },
        { address: '10.1.2.3', family: 4 },
      ],
    });
    expect(await d.deliver({ url: 'https://mixed.example.test/h', secret: null }, EVENT)).toMatchObject({
      delivered: false,
      error: 'target refused: private address',
    });
  });

  it('connects to the vetted address and keeps the Host header of the URL', async () => {
    const asked: string[] = [];
    const { d } = deliverer({
      allowPrivateTargets: true,
      lookup: async (h) => {
        asked.push(h);
        return [{ address: '127.0.0.1', family: 4 }];
      },
    });
    const r = await d.deliver({ url: `http://hooks.example.test:${rx.port}/h/pinned`, secret: null }, EVENT);
    expect(r).toMatchObject({ delivered: true, status: 200 });
    expect(asked).toEqual(['hooks.example.test']);
    expect(rx.at('pinned')[0].headers.host).toBe(`hooks.example.test:${rx.port}`);
  });
  it('falls back to the next vetted address when the first refuses (and never to an unvetted one)', async (ctx) => {
    const v6 = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    const ok = await new Promise<boolean>((resolve) => {
      v6.once('error', () => resolve(false));
      v6.listen(0, '::1', () => resolve(true));
    });
    if (!ok) return ctx.skip();
    try {
      const port = (v6.address() as AddressInfo).port;
      const { d } = deliverer({
        lookup: async () => [
          { address: '127.0.0.1', family: 4 },
          { address: '::1', family: 6 },
        ],
      });
      const r = await d.deliver({ url: `http://dual.example.test:${port}/h`, secret: null }, EVENT);
      // 127.0.0.1:<port> is (almost certainly) closed: the connection moves on to ::1
      expect(r).toMatchObject({ delivered: true, status: 200 });
    } finally {
      v6.close();
    }
  });
});

describe('connection reuse, metrics, shutdown', () => {
  it('reuses one keep-alive connection for sequential deliveries to an origin', async () => {
    const { d } = deliverer();
    for (let i = 0; i < 5; i++) expect((await d.deliver({ url: rx.hook('ka'), secret: null }, EVENT)).delivered).toBe(true);
    const socketIds = new Set(rx.at('ka').map((r) => r.socketId));
    expect(rx.at('ka')).toHaveLength(5);
    expect(socketIds.size).toBe(1);
  });

  it('a failed status (small body) still reuses the connection', async () => {
    const { d } = deliverer();
    rx.set('ka500', { status: 500 });
    for (let i = 0; i < 3; i++) await d.deliver({ url: rx.hook('ka500'), secret: null }, EVENT);
    expect(new Set(rx.at('ka500').map((r) => r.socketId)).size).toBe(1);
  });

  it('delivers many concurrent events without warnings', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const { d } = deliverer();
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) => d.deliver({ url: rx.hook(`many-${i % 4}`), secret: 's' }, EVENT)),
      );
      expect(results.every((r) => r.delivered)).toBe(true);
      expect(d.inFlight()).toBe(0);
      await new Promise((r) => setImmediate(r)); // process warnings are emitted on the next tick
      expect(warnings.map((w) => w.message)).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('keeps at most maxPools: the least recently used idle pool is closed', async () => {
    const rx2 = await startReceiver();
    try {
      const { d } = deliverer({ maxPools: 1 });
      const c1 = rx.connections();
      const c2 = rx2.connections();
      expect((await d.deliver({ url: rx.hook('evict'), secret: null }, EVENT)).delivered).toBe(true);
      expect((await d.deliver({ url: rx2.hook('evict'), secret: null }, EVENT)).delivered).toBe(true); // evicts rx's pool
      expect((await d.deliver({ url: rx.hook('evict'), secret: null }, EVENT)).delivered).toBe(true); // a new connection
      expect(rx.connections() - c1).toBe(2);
      expect(rx2.connections() - c2).toBe(1);
    } finally {
      await rx2.close();
    }
  });

  it('closes a pool idle for poolIdleMs on its clock (the periodic sweep), and keeps one in use', async () => {
    const clock = new ManualClock(Date.now());
    const { d } = deliverer({ poolIdleMs: 2000, clock });
    expect((await d.deliver({ url: rx.hook('idle'), secret: null }, EVENT)).delivered).toBe(true);
    clock.advance(1999);
    expect((await d.deliver({ url: rx.hook('idle'), secret: null }, EVENT)).delivered).toBe(true); // reused
    const [first, second] = rx.at('idle');
    expect(second.socketId).toBe(first.socketId);
    // idle for poolIdleMs since its last use: the next sweep (real time, every second) closes it
    clock.advance(2000);
    await waitFor(() => !rx.socketOpen(first.socketId), 5000, 'the idle pool to be closed');
    expect((await d.deliver({ url: rx.hook('idle'), secret: null }, EVENT)).delivered).toBe(true);
    expect(rx.at('idle')[2].socketId).not.toBe(first.socketId);
  });

  it('outcomes move svc_deliveries_total and the duration histogram (the control plane counts them)', async () => {
    const { d } = deliverer();
    const metrics = createMetrics();
    const db = openDb(':memory:');
    const book = new DeliveryStatusBook(db, metrics, systemClock, pino({ level: 'silent' }));
    try {
      expect(await counter(metrics, 'svc_deliveries_total', { outcome: 'success' })).toBe(0);
      expect(await counter(metrics, 'svc_deliveries_total', { outcome: 'failure' })).toBe(0);
      expect(await counter(metrics, 'svc_delivery_duration_seconds_count')).toBe(0);
      rx.set('m500', { status: 500 });
      for (const path of ['m-ok', 'm-ok', 'm500']) {
        const r = await d.deliver({ url: rx.hook(path), secret: null }, EVENT);
        book.record({
          webhook_id: 'wh_m',
          org_id: 'org_m',
          event_id: 'ev',
          type: 't',
          ok: r.delivered,
          status: r.status ?? null,
          error: r.error ?? null,
          duration_ms: r.duration_ms,
          at: Date.now(),
        });
      }
      expect(await counter(metrics, 'svc_deliveries_total', { outcome: 'success' })).toBe(2);
      expect(await counter(metrics, 'svc_deliveries_total', { outcome: 'failure' })).toBe(1);
      expect(await counter(metrics, 'svc_delivery_duration_seconds_count')).toBe(3);
      expect(await counter(metrics, 'svc_delivery_duration_seconds_bucket', { le: '10' })).toBe(3);
      expect(book.get('wh_m')).toMatchObject({
        last_outcome: 'failure',
        last_status_code: 500,
        consecutive_failures: 1,
        attempts_total: 3,
        failures_total: 1,
      });
    } finally {
      book.close();
      db.close();
    }
  });

  it('counts in-flight deliveries; close() waits for them within the grace period', async () => {
    const { d } = deliverer({ timeoutMs: 2000 });
    rx.set('slow-close', { delayMs: 200 });
    const p = d.deliver({ url: rx.hook('slow-close'), secret: null }, EVENT);
    expect(d.inFlight()).toBe(1);
    await d.close(1000);
    expect((await p).delivered).toBe(true);
    expect(d.inFlight()).toBe(0);
    expect(await d.deliver({ url: rx.hook('after-close'), secret: null }, EVENT)).toMatchObject({
      delivered: false,
      error: 'deliverer closed',
    });
    expect(rx.at('after-close')).toHaveLength(0);
  });

  it('close() aborts deliveries still running after the grace period', async () => {
    const { d } = deliverer({ timeoutMs: 5000 });
    rx.set('hang-close', { hang: true });
    const p = d.deliver({ url: rx.hook('hang-close'), secret: null }, EVENT);
    await waitFor(() => rx.at('hang-close').length === 1, 5000, 'the request to reach the receiver');
    const t0 = Date.now();
    await d.close(200);
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(await p).toMatchObject({ delivered: false, error: 'aborted: shutting down' });
  });
});

describe('memory', () => {
  /** A full collection (V8's gc, exposed at run time), after the jobs under way have ended. */
  async function collect(): Promise<void> {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setImmediate(r));
      gc();
    }
  }

  it('a finished attempt that is still referenced keeps nothing of its caller alive', async () => {
    // an attempt (the exchange's handler) may outlive its result, in the old generation, until a
    // full collection; whatever it points to would then outlive scavenges with it (src/delivery/
    // client.ts, Attempt.settle). Here the test holds every handler the pools were given, and what
    // each caller's callback captured must still be collectable.
    const handlers: ExchangeHandler[] = [];
    const post = Http1Pool.prototype.post;
    Http1Pool.prototype.post = function (this: Http1Pool, path: string, lines: string, body: Buffer, handler: ExchangeHandler) {
      handlers.push(handler);
      return post.call(this, path, lines, body, handler);
    };
    try {
      const { d } = deliverer();
      const captured: Array<WeakRef<object>> = [];
      const results: Array<[string, boolean]> = [];
      for (const path of ['mem-ok', 'mem-fail']) {
        if (path === 'mem-fail') rx.set(path, { status: 500 });
        // what the caller's callback reads when the result comes (the pipeline's reads its grant and event)
        const event = { path, body: Buffer.from(EVENT), state: new Array(1000).fill(path) };
        captured.push(new WeakRef(event));
        await new Promise<void>((resolve) =>
          d.d.send(rx.hook(path), {}, event.body, (r) => {
            results.push([event.path, r.delivered]);
            resolve();
          }),
        );
      }
      expect(results).toEqual([
        ['mem-ok', true],
        ['mem-fail', false],
      ]);
      expect(handlers).toHaveLength(2);
      await collect();
      expect(captured.map((w) => w.deref() === undefined)).toEqual([true, true]);
    } finally {
      Http1Pool.prototype.post = post;
    }
  });
});
