// Ordered delivery per key across kill -9 (CONTRACT 10.1), embedded mode: `svc serve` as a child
// process, a `per_key` webhook and a second, plain webhook (so that events stay held for another
// webhook and their progress matters), 20 installs provisioned and reprovisioned by the local
// runner, a receiver answering in 0-50 ms at random; svc is killed with SIGKILL once part of the
// events arrived and started again on the same database. Per key the ordered receiver sees
// non-decreasing sequences (a repeat allowed only of the last one seen), and none is missing.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { children, spawnService, type ChildService } from '../helpers/child-service.ts';
import { apiClient, newDbWithOrg, waitFor } from '../helpers/service.ts';
import { later } from '../helpers/wait.ts';
import { post, waitWf } from '../helpers/workflows.ts';
import { rid } from '../helpers/ids.ts';

type Json = any;

describe('per_key across kill -9 (embedded mode)', () => {
  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
  });

  it('per key: non-decreasing sequences, a repeat only of the last, none missing', async () => {
    const seen = new Map<string, number[]>();
    let total = 0;
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.url === '/ordered') {
          const ev = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          const list = seen.get(ev.svcorderkey) ?? [];
          list.push(Number(ev.sequence));
          seen.set(ev.svcorderkey, list);
          total++;
        }
        later(Math.floor(Math.random() * 51), () => res.writeHead(200).end(), 'a receiver that answers in 0-50 ms');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const { db, org } = newDbWithOrg('ordered-crash');
      let svc: ChildService = await spawnService(db);
      let api = apiClient(svc.url, org);
      await post(api, '/v1/orgs/current/webhooks', { webhook_url: `${url}/ordered`, delivery: { ordering: 'per_key' } });
      await post(api, '/v1/orgs/current/webhooks', { webhook_url: `${url}/plain` });
      const app = await post(api, '/v1/apps', { name: rid('app') });
      await post(api, `/v1/apps/${app.app_id}/configs`, { components: [{ name: 'api' }, { name: 'worker' }] });
      const installs: string[] = [];
      for (let i = 0; i < 20; i++) installs.push((await post(api, '/v1/installs', { app_id: app.app_id, name: rid('ins') })).install_id);
      await waitFor(() => total >= 60, 30_000, 'some deliveries before the kill');
      svc.proc.kill('SIGKILL');
      await svc.exited;
      const before = total;
      svc = await spawnService(db);
      api = apiClient(svc.url, org);
      for (const i of installs) {
        for (const w of (await api.get(`/v1/installs/${i}/workflows`)).body as Json[]) await waitWf(api, w.workflow_id, 60_000);
      }
      const last = new Map<string, number>();
      for (const i of installs) last.set(i, (await api.get(`/v1/events?order_key=${i}&limit=500`)).body.data.length);
      await waitFor(
        () => installs.every((i) => new Set(seen.get(i) ?? []).size === last.get(i)),
        60_000,
        'every event of every install at the ordered webhook',
      );
      expect(before).toBeLessThan([...last.values()].reduce((a, b) => a + b, 0));
      for (const i of installs) {
        const seqs = seen.get(i)!;
        let max = 0;
        for (const s of seqs) {
          expect(s, `${i}: ${seqs.join(',')}`).toBeGreaterThanOrEqual(max);
          max = s;
        }
        expect([...new Set(seqs)], i).toEqual(Array.from({ length: last.get(i)! }, (_, k) => k + 1));
      }
      const events = [...last.values()].reduce((a, b) => a + b, 0);
      console.log(
        `ordered webhook: ${before} deliveries before the kill, ${total} in all for ${events} events (${total - events} repeats)`,
      );
      svc.proc.kill('SIGKILL');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  }, 180_000);
});
