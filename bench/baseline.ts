// The baseline: a bare NATS subscription that, for each fact the producer sends, answers the
// request at once and POSTs a prebuilt CloudEvent body with undici (one keep-alive Pool for the
// receiver's origin) once per simulated webhook, with svc's bounds: at most 8 POSTs in flight per
// webhook (a FIFO queue behind them) and 64 connections per origin (bench/fanout.ts).
// No SQLite, no JetStream, no validation, no signing: the cost floor of "NATS in, N POSTs out".
//
// Run by bench/run.ts as a child process: `node --import tsx bench/baseline.ts`, with
// BENCH_NATS_URL and BENCH_TARGETS ({"<org_id>": ["http://…/h/0", …]}) in the environment.
// Prints "ready" once subscribed; exits on SIGTERM.
import { connect } from '@nats-io/transport-node';
import { Pool } from 'undici';
import { ingestWildcard } from '../src/bus/subjects.ts';
import { cloudEventTemplate, CONNECTIONS_PER_ORIGIN, eventBody, WebhookLane } from './fanout.ts';

const natsUrl = process.env.BENCH_NATS_URL;
const targets = JSON.parse(process.env.BENCH_TARGETS ?? '{}') as Record<string, string[]>;
if (!natsUrl) throw new Error('BENCH_NATS_URL is not set');

let failures = 0;
const outcome = (delivered: boolean, err: unknown) => {
  if (delivered) return;
  failures++;
  if (failures <= 5) console.error('baseline POST failed:', err instanceof Error ? err.message : (err ?? 'not 2xx'));
};
const pools = new Map<string, Pool>();
const orgs = new Map<string, { lanes: WebhookLane[]; template: string[] }>();
for (const [orgId, urls] of Object.entries(targets)) {
  const lanes = urls.map((u) => {
    const url = new URL(u);
    let pool = pools.get(url.origin);
    if (!pool) pools.set(url.origin, (pool = new Pool(url.origin, { connections: CONNECTIONS_PER_ORIGIN, keepAliveTimeout: 10_000 })));
    return new WebhookLane(pool, url.pathname + url.search, { outcome });
  });
  orgs.set(orgId, { lanes, template: cloudEventTemplate(orgId) });
}

const nc = await connect({ servers: natsUrl, name: 'bench-baseline' });
const OK = new TextEncoder().encode('{"ok":true}');
nc.subscribe(ingestWildcard, {
  callback: (err, m) => {
    if (err) return;
    // svc.ingest.<org>.workflows.<wf>
    const t = m.subject.split('.');
    const org = orgs.get(t[2]);
    m.respond(OK);
    if (!org || t[3] !== 'workflows') return;
    const body = eventBody(org.template, t[4]);
    for (const lane of org.lanes) lane.offer(body);
  },
});
await nc.flush();
console.log('ready');

process.on('SIGTERM', () => {
  void (async () => {
    await nc.drain().catch(() => {});
    await Promise.allSettled([...pools.values()].map((p) => p.close()));
    if (failures) console.error(`baseline: ${failures} POSTs failed`);
    process.exit(0);
  })();
});
