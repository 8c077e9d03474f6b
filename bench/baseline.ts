// The baseline: a bare NATS subscription that, for each fact the producer sends, answers the
// request at once and POSTs a prebuilt CloudEvent body with undici (one keep-alive Pool for the
// receiver's origin) once per simulated webhook, with svc's bounds: at most 8 POSTs in flight per
// webhook (a FIFO queue behind them) and 64 connections per origin.
// No SQLite, no JetStream, no validation, no signing: the cost floor of "NATS in, N POSTs out".
//
// Run by bench/run.ts as a child process: `node --import tsx bench/baseline.ts`, with
// BENCH_NATS_URL and BENCH_TARGETS ({"<org_id>": ["http://…/h/0", …]}) in the environment.
// Prints "ready" once subscribed; exits on SIGTERM.
import { connect } from '@nats-io/transport-node';
import { Pool } from 'undici';
import { toCloudEvent, sourceFor } from '../src/events/cloudevent.ts';
import { CE_CONTENT_TYPE } from '../src/delivery/client.ts';
import { PER_WEBHOOK_IN_FLIGHT as MAX_IN_FLIGHT } from '../src/dataplane/pipeline.ts';
import { ingestWildcard } from '../src/bus/subjects.ts';

const CONNECTIONS_PER_ORIGIN = 64; // svc's Deliverer default

const natsUrl = process.env.BENCH_NATS_URL;
const targets = JSON.parse(process.env.BENCH_TARGETS ?? '{}') as Record<string, string[]>;
if (!natsUrl) throw new Error('BENCH_NATS_URL is not set');

/** A body of the shape and size svc delivers for an external workflow `started`, split at the workflow id. */
function template(orgId: string, baseUrl: string): string[] {
  const SENTINEL = 'bwf_SENTINEL';
  const ev = toCloudEvent(
    {
      kind: 'workflow',
      transition: 'started',
      org_id: orgId,
      time: new Date().toISOString(),
      workflow: { id: SENTINEL, type: 'provision', owner_id: 'inst_bench', owner_type: 'installs' },
      install_id: 'inst_bench',
    },
    { source: sourceFor(baseUrl), dashboardUrl: `${baseUrl}/dashboard` },
  );
  if (!ev) throw new Error('the template event is not classified');
  return JSON.stringify(ev).split(SENTINEL);
}

/** One simulated webhook: at most MAX_IN_FLIGHT POSTs in flight, the rest queued in order. */
class Hook {
  private inFlight = 0;
  private readonly queue: Buffer[] = [];
  constructor(
    private readonly pool: Pool,
    private readonly path: string,
  ) {}

  offer(body: Buffer): void {
    if (this.inFlight < MAX_IN_FLIGHT) this.send(body);
    else this.queue.push(body);
  }

  private send(body: Buffer): void {
    this.inFlight++;
    this.pool
      .request({ method: 'POST', path: this.path, headers: { 'content-type': CE_CONTENT_TYPE }, body })
      .then((res) => res.body.dump())
      .catch((err: unknown) => {
        failures++;
        if (failures <= 5) console.error('baseline POST failed:', err instanceof Error ? err.message : err);
      })
      .finally(() => {
        this.inFlight--;
        const next = this.queue.shift();
        if (next !== undefined) this.send(next);
      });
  }
}

let failures = 0;
const pools = new Map<string, Pool>();
const orgs = new Map<string, { hooks: Hook[]; parts: string[] }>();
for (const [orgId, urls] of Object.entries(targets)) {
  const hooks = urls.map((u) => {
    const url = new URL(u);
    let pool = pools.get(url.origin);
    if (!pool) pools.set(url.origin, (pool = new Pool(url.origin, { connections: CONNECTIONS_PER_ORIGIN, keepAliveTimeout: 10_000 })));
    return new Hook(pool, url.pathname + url.search);
  });
  orgs.set(orgId, { hooks, parts: template(orgId, 'http://127.0.0.1:8080') });
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
    const body = Buffer.from(org.parts.join(t[4]), 'utf8');
    for (const h of org.hooks) h.offer(body);
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
