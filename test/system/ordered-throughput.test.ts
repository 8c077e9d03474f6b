// Throughput of ordered delivery (CONTRACT 10.1): with 1,000 active keys, a `per_key` webhook
// delivers at least 0.8 of what an unordered one does on the same machine. Both webhooks get the
// same 3,000 events (1,000 installs x 3) in the same run from one embedded svc, to a receiver that
// answers in 30 ms (so that delivery, 8 in flight per webhook, not the producer, is what limits
// them: about 266/s each); each one's rate is its deliveries over the time from the first fact to its last
// delivery. The figures are printed (the bench of issue 53).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, waitFor, type TestService } from '../helpers/service.ts';
import { later } from '../helpers/wait.ts';
import { rid } from '../helpers/ids.ts';

type Json = any;

describe('per_key throughput with 1,000 keys', () => {
  let svc: TestService;
  let server: http.Server;
  let url: string;
  const last = new Map<string, number>();
  const count = new Map<string, number>();

  beforeAll(async () => {
    svc = await startService();
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const p = req.url ?? '';
        count.set(p, (count.get(p) ?? 0) + 1);
        last.set(p, Date.now());
        later(30, () => res.writeHead(200).end(), 'a receiver that answers in 30 ms');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await svc?.stop();
    server?.closeAllConnections();
    await new Promise<void>((r) => server?.close(() => r()));
  });

  it('ordered delivers at least 0.8 of the unordered rate', async () => {
    const org = svc.createOrg(rid('org'));
    const api = svc.api(org);
    expect((await api.post('/v1/orgs/current/webhooks', { webhook_url: `${url}/ordered`, delivery: { ordering: 'per_key' } })).status).toBe(
      201,
    );
    expect((await api.post('/v1/orgs/current/webhooks', { webhook_url: `${url}/plain` })).status).toBe(201);
    const installs = Array.from({ length: 1000 }, () => rid('inst'));
    const t0 = Date.now();
    for (let n = 0; n < 3; n++) {
      for (let i = 0; i < installs.length; i += 200) {
        await Promise.all(
          installs.slice(i, i + 200).map(async (install) => {
            const w = rid('wfx');
            const body = {
              kind: 'workflow',
              transition: 'started',
              workflow: { id: w, type: 'manual_deploy', owner_id: install, owner_type: 'installs' },
            };
            const m = await svc.server.bus.request(`svc.ingest.${org.org_id}.workflows.${w}`, JSON.stringify(body), { timeoutMs: 10_000 });
            expect((m.json() as Json).ok).toBe(true);
          }),
        );
      }
    }
    await waitFor(() => count.get('/ordered') === 3000 && count.get('/plain') === 3000, 120_000, 'every delivery');
    const rate = (p: string) => 3000 / ((last.get(p)! - t0) / 1000);
    const ordered = rate('/ordered');
    const plain = rate('/plain');
    console.log(`per_key ${ordered.toFixed(0)} del/s, unordered ${plain.toFixed(0)} del/s, ratio ${(ordered / plain).toFixed(2)}`);
    expect(ordered / plain).toBeGreaterThanOrEqual(0.8);
  });
});
