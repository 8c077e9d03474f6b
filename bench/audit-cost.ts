// What the audit row costs a write (issue 31; CONTRACT 2): webhook PATCHes (a secret rotation,
// the write the API serves most) through real HTTP against svc in this process (embedded mode, a
// real SQLite file), with the audit row and, for comparison only, with the engine transaction's
// audit write made a no-op. Rounds alternate (with, without, with, …) so that warm-up and the
// machine's noise fall on both alike; each round is N sequential PATCHes by C concurrent clients.
// Short rounds, many of them: on a 2-core VM a round's time drifts by ±10 % over a minute, more
// than the row costs, so long rounds measure the drift (issue 31 saw 2.7 % to 12.6 % from one
// code with 2000-write rounds; 500-write rounds agree within ±3 %).
//
//   npx tsx bench/audit-cost.ts            # N=500 per round, 24 rounds each way
//   AUDIT_BENCH_N=5000 AUDIT_BENCH_ROUNDS=6 npx tsx bench/audit-cost.ts
//   AUDIT_BENCH_OP=create npx tsx bench/audit-cost.ts   # webhook creates instead (a write of more pages)
//   AUDIT_BENCH_VIA=engine npx tsx bench/audit-cost.ts  # no HTTP: the PATCH's transaction alone (the
//       route's handle, patchWebhook, in engine.change, with and without its audit row), CPU per
//       write in blocks of N alternating, a smaller whole, so the row's share reads larger than over HTTP
import { fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { startServer } from '../src/server.ts';
import type { Tx } from '../src/engine/transaction.ts';
import { openDb } from '../store/db.ts';
import { createOrg } from '../store/orgs.ts';
import { patchWebhook } from '../src/services/webhooks.ts';

const N = Number(process.env.AUDIT_BENCH_N ?? 500);
const ROUNDS = Number(process.env.AUDIT_BENCH_ROUNDS ?? 24);
const CONCURRENCY = Number(process.env.AUDIT_BENCH_CONCURRENCY ?? 8);
const HOOKS = 50;
const OP = process.env.AUDIT_BENCH_OP === 'create' ? 'create' : 'patch';
const VIA = process.env.AUDIT_BENCH_VIA === 'engine' ? 'engine' : 'http';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-audit-bench-'));
const dbFile = path.join(dir, 'svc.db');
const h = openDb(dbFile);
const { org, api_token } = createOrg(h, 'bench');
h.close();

const server = await startServer(
  {
    port: 0,
    host: '127.0.0.1',
    db: dbFile,
    natsUrl: null,
    baseUrl: null,
    dashboardUrl: null,
    localRunner: false,
    runnerHealthIntervalMs: 15 * 60_000,
    deliveryTimeoutMs: 5000,
    allowPrivateTargets: true,
    driftIntervalMs: null,
    deliveryConcurrency: 256,
    deliver: true,
    natsCreds: null,
    deliveryThreads: null,
    maxWebhooksPerOrg: 1_000_000,
    apiQueuePerOrg: 0,
    ingestRatePerOrg: 0,
    maxEventsPerOrg: 0,
  },
  { logger: pino({ level: 'silent' }) },
);
const headers = { authorization: `Bearer ${api_token}`, 'x-svc-org-id': org.org_id, 'content-type': 'application/json' };
const call = async (method: string, p: string, body: unknown) => {
  const r = await fetch(server.url + p, { method, headers, body: JSON.stringify(body) });
  const text = await r.text();
  if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${text}`);
  return JSON.parse(text) as { webhook_id: string };
};

const ids: string[] = [];
for (let i = 0; i < HOOKS; i++)
  ids.push((await call('POST', '/v1/orgs/current/webhooks', { webhook_url: `http://127.0.0.1:9/h/${i}` })).webhook_id);

// the comparison's "without": the same transaction, its audit write skipped
const engine = server.ctx.engine;
const change = engine.change.bind(engine);
const withoutAudit = <T>(fn: (t: Tx) => T): T => change((t) => fn({ ...t, audit: () => {} }));

let seq = 0;
const actor = { token_id: 'tok_bench', token_name: 'bench' };
/** One round without HTTP: the PATCH route's transaction (patchWebhook and its audit row, as src/http/api-route.ts writes it). */
function engineRound(audited: boolean): void {
  for (let i = 0; i < N; i++) {
    const id = ids[i % HOOKS];
    change((t) => {
      const w = patchWebhook(server.ctx, org.org_id, id, { secret: `s-${seq++}` });
      if (audited)
        t.audit({ org_id: org.org_id, actor, action: 'webhooks.update', resource_type: 'webhook', resource_id: w.webhook_id, status: 200 });
      return w;
    });
  }
}

/** One round: its wall time (ms); its CPU time (ms, this process: svc alone, the clients run in another) into `cpu`. */
async function round(audited: boolean, cpu?: number[]): Promise<number> {
  if (VIA === 'engine') {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    engineRound(audited);
    const c = process.cpuUsage(c0);
    cpu?.push((c.user + c.system) / 1000);
    // the replicator and the thread hear of each change after it: let them, outside the timing
    await new Promise((r) => setImmediate(r));
    return Number(process.hrtime.bigint() - t0) / 1e6;
  }
  engine.change = audited ? change : withoutAudit;
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await clientRound({ url: server.url, headers, op: OP, n: N, concurrency: CONCURRENCY, ids, seq });
  seq += N;
  const c = process.cpuUsage(c0);
  cpu?.push((c.user + c.system) / 1000);
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

// the clients: a process of their own (bench/audit-cost-client.ts), so that this process's CPU is svc's
const client = fork(path.join(import.meta.dirname, 'audit-cost-client.ts'), [], { execArgv: ['--import', 'tsx'] });
function clientRound(r: object): Promise<void> {
  return new Promise((resolve, reject) => {
    client.once('message', (m: { done?: boolean; error?: string }) => (m.error ? reject(new Error(m.error)) : resolve()));
    client.send(r);
  });
}

await round(true); // warm-up, not counted
await round(false);
const ms: Record<'with' | 'without', number[]> = { with: [], without: [] };
const cpu: Record<'with' | 'without', number[]> = { with: [], without: [] };
for (let r = 0; r < ROUNDS; r++) {
  for (const audited of r % 2 ? [false, true] : [true, false]) {
    const k = audited ? 'with' : 'without';
    ms[k].push(await round(audited, cpu[k]));
  }
}
engine.change = change;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const total = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const rows = (['without', 'with'] as const).map((k) => ({
  audit: k,
  rounds: ms[k].map((x) => Math.round(x)).join(' '),
  'median ms / round': Math.round(median(ms[k])),
  'µs / write (all rounds)': Math.round((total(ms[k]) * 1000) / (N * ROUNDS)),
  'writes / s': Math.round((N * ROUNDS * 1000) / total(ms[k])),
  'CPU µs / write': Math.round((total(cpu[k]) * 1000) / (N * ROUNDS)),
}));
console.log(
  VIA === 'engine'
    ? `${N} webhook PATCH transactions per round in the engine (no HTTP), ${ROUNDS} rounds each way (alternating)`
    : `${N} webhook ${OP === 'patch' ? 'PATCHes' : 'creates'} per round over HTTP, ${CONCURRENCY} clients, ${ROUNDS} rounds ` +
        `each way (alternating)`,
);
console.table(rows);
const pct = (a: number, b: number) => `${((a / b - 1) * 100).toFixed(1)} %`;
console.log(
  `cost of the audit row: wall ${pct(total(ms.with), total(ms.without))} (all ` +
    `rounds), ${pct(median(ms.with), median(ms.without))} (medians); CPU ${pct(total(cpu.with), total(cpu.without))}`,
);
const audited = openDb(dbFile);
console.log(`audit rows written: ${(audited.prepare('SELECT COUNT(*) AS n FROM audit_log').get() as { n: number }).n}`);
audited.close();
client.disconnect();
await server.stop();
fs.rmSync(dir, { recursive: true, force: true });
