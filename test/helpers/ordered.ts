// Ordered delivery tests' parts (CONTRACT 10.1): a receiver that keeps each key's sequences as they
// arrive, and a producer's fact keyed by an install.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { later } from './wait.ts';
import { rid } from './ids.ts';

/** Per path, per key: the sequences in the order they arrived (and when); answers after `delayMs(event)`, never when null. */
export async function keyedReceiver(delayMs: (ev: any) => number | null) {
  const seen = new Map<string, Map<string, number[]>>();
  /** when each key's first event arrived (ms since the epoch), all paths together */
  const firstAt = new Map<string, number>();
  const hanging = new Set<http.ServerResponse>();
  const count = new Map<string, number>();
  const last = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '';
      const ev = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      let byKey = seen.get(path);
      if (!byKey) seen.set(path, (byKey = new Map()));
      const list = byKey.get(ev.svcorderkey) ?? [];
      list.push(Number(ev.sequence));
      byKey.set(ev.svcorderkey, list);
      count.set(path, (count.get(path) ?? 0) + 1);
      last.set(path, Date.now());
      if (!firstAt.has(ev.svcorderkey)) firstAt.set(ev.svcorderkey, Date.now());
      const ms = delayMs(ev);
      if (ms === null) hanging.add(res);
      else later(ms, () => res.writeHead(200).end(), 'a receiver that answers after a while');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    firstAt,
    count: (path: string) => count.get(path) ?? 0,
    last: (path: string) => last.get(path) ?? 0,
    /** distinct (key, sequence) pairs seen at a path */
    distinct: (path: string) => [...(seen.get(path)?.values() ?? [])].reduce((n, l) => n + new Set(l).size, 0),
    close: async () => {
      for (const r of hanging) r.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** An external workflow's `started` of an install: one fact, one event keyed by the install. */
export function fact(org: string, install: string) {
  const w = rid('wfx');
  return {
    subject: `svc.ingest.${org}.workflows.${w}`,
    body: {
      kind: 'workflow',
      transition: 'started',
      workflow: { id: w, type: 'manual_deploy', owner_id: install, owner_type: 'installs' },
    },
  };
}
