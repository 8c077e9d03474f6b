// What an attempt keeps of its exchange (CONTRACT 4.5, new in 0.3; bounds CONTRACT 8): the request
// headers sent (signatures cut to 8 characters, never the secret), the receiver's status, headers
// and first 4 KiB of its body, over real HTTP against a real receiver.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXCHANGE } from '../../src/delivery/client.ts';
import { parseExchange, redactSignature, BODY_KEEP, HEADERS_KEEP } from '../../src/delivery/exchange-record.ts';
import { decodeOutcomeBatch, encodeOutcomeBatch, outcomeOf } from '../../src/outcomes/outcome.ts';
import { testDeliverer, type TestDeliverer } from '../helpers/deliverer.ts';

const SECRET = `whsec_${Buffer.from('a-very-secret-signing-key-0123456789').toString('base64')}`;
const MIB = Buffer.alloc(1024 * 1024, 'x');

let server: http.Server;
let base: string;
let td: TestDeliverer;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/bad') {
        res.writeHead(400, { 'content-type': 'application/json', 'x-receiver-reason': 'missing field install_id' });
        res.end(JSON.stringify({ error: 'install_id is required' }));
      } else if (req.url === '/big') {
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': MIB.length });
        res.end(MIB);
      } else if (req.url === '/binary') {
        res.writeHead(502, { 'content-type': 'application/octet-stream' });
        res.end(Buffer.from([0xff, 0xfe, 0x00, 0x81]));
      } else if (req.url === '/many-headers') {
        const h: Record<string, string> = {};
        for (let i = 0; i < 40; i++) h[`x-h${i}`] = 'v'.repeat(300);
        res.writeHead(204, h);
        res.end();
      } else {
        res.writeHead(200);
        res.end('ok');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  td = testDeliverer();
});
afterAll(async () => {
  await td?.close();
  await new Promise((r) => server.close(r));
});

const body = JSON.stringify({ id: 'evt_exchange_1', type: 'com.svc.test.v1' });

describe('an attempt keeps what it sent and what the receiver said', () => {
  it('a 400 with a JSON body and a custom header: status, header and body kept; signatures redacted; no secret', async () => {
    const r = await td.deliver({ url: `${base}/bad`, secret: SECRET }, body);
    expect(r).toMatchObject({ delivered: false, status: 400 });
    const text = r[EXCHANGE] as string;
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(SECRET.slice(6));
    const kept = parseExchange(text)!;
    expect(kept.response).toMatchObject({ status: 400, body: '{"error":"install_id is required"}', body_truncated: false });
    expect(kept.response!.headers['x-receiver-reason']).toBe('missing field install_id');
    expect(kept.response!.headers['content-type']).toBe('application/json');
    const sent = kept.request!.headers;
    expect(sent['webhook-id']).toBe('evt_exchange_1');
    expect(sent['content-type']).toMatch(/cloudevents/);
    expect(sent['content-length']).toBe(String(Buffer.byteLength(body)));
    // webhook-signature: v1,<8 characters>; x-svc-signature: its first 8
    expect(sent['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/=]{8}$/);
    expect(sent['x-svc-signature']).toMatch(/^[0-9a-f]{8}$/);
    // not part of what a result serialises to (ping, resend answers)
    expect(JSON.parse(JSON.stringify(r))).toEqual({ delivered: false, status: 400, error: 'HTTP 400', duration_ms: r.duration_ms });
  });

  it('a 1 MiB body keeps its first 4 KiB, marked truncated', async () => {
    const r = await td.deliver({ url: `${base}/big`, secret: null }, body);
    expect(r.status).toBe(200);
    const kept = parseExchange(r[EXCHANGE])!;
    expect(kept.response!.body).toBe('x'.repeat(BODY_KEEP));
    expect(kept.response!.body_truncated).toBe(true);
  });

  it('a body that is not UTF-8 is kept as base64; headers past 8 KiB are cut and marked', async () => {
    const bin = parseExchange((await td.deliver({ url: `${base}/binary`, secret: null }, body))[EXCHANGE])!;
    expect(bin.response).toMatchObject({
      status: 502,
      body: Buffer.from([0xff, 0xfe, 0x00, 0x81]).toString('base64'),
      body_encoding: 'base64',
      body_truncated: false,
    });
    const many = parseExchange((await td.deliver({ url: `${base}/many-headers`, secret: null }, body))[EXCHANGE])!;
    expect(many.response!.status).toBe(204);
    expect(many.response!.headers_truncated).toBe(true);
    const size = Object.entries(many.response!.headers).reduce((n, [k, v]) => n + k.length + v.length + 4, 0);
    expect(size).toBeLessThanOrEqual(HEADERS_KEEP);
    expect(many.response!.body).toBe('');
  });

  it('no response: request kept, response null', async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const r = await td.deliver({ url: `http://127.0.0.1:${port}/`, secret: SECRET }, body);
    expect(r.delivered).toBe(false);
    const kept = parseExchange(r[EXCHANGE])!;
    expect(kept.response).toBeNull();
    expect(kept.request!.headers['webhook-id']).toBe('evt_exchange_1');
  });

  it('travels in outcome batches (older tuples still decode)', async () => {
    const r = await td.deliver({ url: `${base}/bad`, secret: SECRET }, body);
    const o = outcomeOf({ webhook_id: 'wh_1', org_id: 'org_1', event_id: 'evt_exchange_1', type: 't' }, r, Date.now());
    const batch = decodeOutcomeBatch(encodeOutcomeBatch({ id: 'b1', sent_at: 1, worker: 'w', in_flight: 0, dropped: {}, outcomes: [o] }))!;
    expect(batch.outcomes[0].exchange).toBe(r[EXCHANGE]);
    expect(batch.outcomes[0].recovery_id).toBeUndefined();
    const old = decodeOutcomeBatch(
      JSON.stringify({ i: 'b2', t: 1, w: 'w', f: 0, d: {}, o: [['wh', 'org', 'evt', 't', 1, 200, null, 3, 4, 'rec_1']] }),
    )!;
    expect(old.outcomes[0]).toMatchObject({ recovery_id: 'rec_1', exchange: undefined });
  });

  it('redacts each signature of a rotated webhook-signature', () => {
    expect(redactSignature('v1,abcdefghijklmnop v1,ABCDEFGHIJKLMNOP')).toBe('v1,abcdefgh v1,ABCDEFGH');
    expect(redactSignature('0123456789abcdef')).toBe('01234567');
  });

  it('memory stays flat over 2,000 attempts answered with 1 MiB each', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const kept: string[] = [];
    const run = async (n: number) => {
      for (let i = 0; i < n; i += 50) {
        const rs = await Promise.all(Array.from({ length: 50 }, () => td.deliver({ url: `${base}/big`, secret: SECRET }, body)));
        // what the attempt log would hold: the records (bounded each)
        for (const r of rs) kept.push(r[EXCHANGE] as string);
      }
    };
    await run(200);
    gc();
    const before = process.memoryUsage();
    await run(2000);
    gc();
    const after = process.memoryUsage();
    for (const k of kept) expect(k.length).toBeLessThan(BODY_KEEP + HEADERS_KEEP + 1024);
    // 2,200 records of about 5 KiB are held above (about 11 MiB): the 1 MiB bodies are not
    const grown =
      (after.heapUsed + after.external + after.arrayBuffers - (before.heapUsed + before.external + before.arrayBuffers)) / 1024 / 1024;
    expect(grown).toBeLessThan(24);
    expect((after.rss - before.rss) / 1024 / 1024).toBeLessThan(64);
  }, 60_000);
});

describe('BodyKeeper', () => {
  it('keeps the first 4 KiB of a body read in pieces of any size, and counts the rest', async () => {
    const { BodyKeeper } = await import('../../src/delivery/exchange-record.ts');
    const whole = Buffer.from(Array.from({ length: 10_000 }, (_, i) => 97 + (i % 26)));
    for (const piece of [1, 7, 100, 4095, 4096, 5000, 10_000]) {
      const k = new BodyKeeper();
      for (let at = 0; at < whole.length; at += piece) {
        const n = Math.min(piece, whole.length - at);
        // the piece sits at an offset of a larger buffer, as in the connection's read buffer
        const buf = Buffer.concat([Buffer.from('junk'), whole.subarray(at, at + n), Buffer.from('tail')]);
        k.add(n, buf, 4);
      }
      expect(k.bytes().equals(whole.subarray(0, BODY_KEEP)), `pieces of ${piece}`).toBe(true);
      expect(k.total).toBe(whole.length);
    }
  });
});
