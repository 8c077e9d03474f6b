// Attempts keep what a receiver said (CONTRACT 4.5, new in 0.3), in both modes: in NATS mode the
// kept request and response travel with the outcome batches over JetStream. A receiver answers
// 400 with a JSON body and a header of its own, another 200 with 100 KiB: the attempt list with
// ?include=request,response shows the one's status, header and body, the other's first 4 KiB
// marked truncated. Attempts kept before 0.3 (no record) read as null, and retention prunes the
// records with their attempts.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../helpers/clock.ts';
import { findNatsServer, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.ts';
import { startService, waitFor, type ApiClient, type TestService } from '../helpers/service.ts';
import { get, post, waitWf } from '../helpers/workflows.ts';
import { openDb } from '../../store/db.ts';
import { listAttempts, pruneHistory, saveAttempts } from '../../store/history.ts';
import { BODY_KEEP } from '../../src/delivery/exchange-record.ts';

type Json = any;

const HOOKS = '/v1/orgs/current/webhooks';
const modes = findNatsServer() ? (['embedded', 'nats'] as const) : (['embedded'] as const);
const BAD_BODY = JSON.stringify({ error: 'install_id is required' });

describe.each(modes)('attempts keep request and response (%s mode)', (mode) => {
  let nats: NatsServerHandle | null = null;
  let svc: TestService;
  let receiver: http.Server;
  let base: string;
  let api: ApiClient;
  const clock = new ManualClock(Date.now());

  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.url === '/bad') {
          res.writeHead(400, { 'content-type': 'application/json', 'x-receiver-reason': 'schema-v2-mismatch' });
          res.end(BAD_BODY);
        } else {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end('y'.repeat(100 * 1024));
        }
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
    if (mode === 'nats') nats = await startNatsServer();
    svc = await startService({ eventRetentionMs: 3_600_000, ...(nats ? { natsUrl: nats.url } : {}) }, { clock });
    api = svc.api(svc.createOrg('exchange'));
  });
  afterAll(async () => {
    await svc?.stop();
    await nats?.stop();
    await new Promise((r) => receiver?.close(r));
  });

  it('shows the 400 body and header, and 4 KiB of a long body marked truncated; pruned with the attempts', async () => {
    const bad = (await post(api, HOOKS, { webhook_url: `${base}/bad` })).webhook_id;
    const long = (await post(api, HOOKS, { webhook_url: `${base}/long` })).webhook_id;
    const appId = (await post(api, '/v1/apps', { name: 'shop' })).app_id;
    await post(api, `/v1/apps/${appId}/configs`, { components: [{ name: 'api' }] });
    const inst = await post(api, '/v1/installs', { app_id: appId, name: 'eu-1' });
    const wfs = await get(api, `/v1/installs/${inst.install_id}/workflows`);
    expect((await waitWf(api, wfs[0].workflow_id)).status).toBe('succeeded');
    await svc.settled(20_000);
    const attempts = (hook: string) =>
      waitFor(
        async () => {
          const d: Json[] = (await get(api, `${HOOKS}/${hook}/attempts?include=request,response`)).data;
          return d.length >= 4 ? d : undefined;
        },
        10_000,
        'attempts in the log',
      );
    const badAttempts = await attempts(bad);
    for (const a of badAttempts) {
      expect(a.response).toMatchObject({ status: 400, body: BAD_BODY, body_truncated: false });
      expect(a.response.headers['x-receiver-reason']).toBe('schema-v2-mismatch');
      expect(a.request.headers['webhook-id']).toBe(a.event_id);
    }
    for (const a of await attempts(long)) {
      expect(a.outcome).toBe('success');
      expect(a.response).toMatchObject({ status: 200, body: 'y'.repeat(BODY_KEEP), body_truncated: true });
    }
    // past the retention, the records go with their attempts
    const t0 = clock.now();
    const old = new Set(badAttempts.map((a) => a.event_id));
    clock.advance(3_600_000 + 1); // (the runners' health checks on this clock emit new events meanwhile)
    expect((await get(api, `${HOOKS}/${bad}/attempts?include=response&limit=500`)).data.filter((a: Json) => old.has(a.event_id))).toEqual(
      [],
    );
    // the rows themselves, records and all, go at the next prune (a timer of the engine's clock)
    clock.advance(15 * 60_000);
    await waitFor(
      () => {
        const db = openDb(svc.db);
        try {
          return (db.prepare('SELECT COUNT(*) AS n FROM delivery_attempts WHERE kept_ms <= ?').get(t0) as { n: number }).n === 0
            ? true
            : undefined;
        } finally {
          db.close();
        }
      },
      10_000,
      'the old attempts pruned',
    );
  });
});

describe('the attempt log store', () => {
  it('an attempt without a record reads as null; the record is read only when asked; prune removes both', () => {
    const db = openDb(':memory:');
    const row = {
      webhook_id: 'wh_1',
      org_id: 'org_1',
      event_id: 'evt_1',
      type: 't',
      attempted_ms: 1000,
      ok: false,
      status_code: 400,
      error: 'HTTP 400',
      duration_ms: 3,
      recovery_id: null,
      kept_ms: 1000,
    };
    saveAttempts(db, [row, { ...row, event_id: 'evt_2', attempted_ms: 1001, exchange: '{"request":null,"response":{"status":400}}' }]);
    const q = { webhookId: 'wh_1', keptSinceMs: 0, sinceMs: null, untilMs: null, ok: null, eventId: null, beforeSeq: 0, limit: 10 };
    const withRecords = listAttempts(db, { ...q, withExchange: true });
    expect(withRecords.map((a) => [a.event_id, a.exchange])).toEqual([
      ['evt_2', '{"request":null,"response":{"status":400}}'],
      ['evt_1', null],
    ]);
    expect(listAttempts(db, q).map((a) => a.exchange)).toEqual([null, null]);
    pruneHistory(db, 2000);
    expect(db.prepare('SELECT COUNT(*) AS n FROM delivery_attempts').get()).toEqual({ n: 0 });
    db.close();
  });
});
