// CPU per delivery of svc's delivery path against the bare floor, in one process, same run
// (issue 20, "per delivery"). A node:http receiver in a child process (204 at once, keep-alive:
// its CPU is counted for neither side) and N webhooks of one org on it; M events pushed through
//
//   floor  an undici Pool per origin (64 connections, keep-alive), a prebuilt body per event, at
//          most 8 POSTs in flight per webhook and a FIFO behind them, no signing (bench/baseline.ts
//          without NATS)
//   svc    DeliveryPipeline with a real WebhookRegistry, Deliverer, signer and BatchingOutcomeSink
//          (its send a no-op), assembled as src/dataplane/data-plane.ts does, fed like a source:
//          as many events as room() allows, more on whenRoom()
//
// CPU is this process's process.cpuUsage() (user + system, every thread) over each run, divided by
// the deliveries; the sides are interleaved, ROUNDS rounds, and the median of the rounds reported.
//
//   npx tsx bench/delivery-path.ts [--rounds 3] [--deliveries 30000] [--fanouts 10,100] [--only svc|floor]
//                                  [--shared-secret] [--from dist|src] [--before DIR]
//
// --before DIR adds a third side, svc as built in another checkout (DIR/dist, e.g. `git archive` of
// the commit before a change, with node_modules linked and `node scripts/build.mjs` run there), so
// that a change is measured before and after in the same run.
//   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/delivery-path.ts --only svc
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import pino from 'pino';
import { Pool } from 'undici';
import { spawnSync } from 'node:child_process';
import type { EventRoute } from '../src/domain/event-route.ts';
import type { OutcomeBatch } from '../src/outcomes/outcome.ts';
import type { WebhookEntry } from '../src/domain/webhook-entry.ts';
import type { InboundEvent, ProgressStore, DeliveryPipeline as Pipeline } from '../src/dataplane/pipeline.ts';
import { toCloudEvent, sourceFor } from '../src/events/cloudevent.ts';

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] ? process.argv[i + 1] : dflt;
};
const ROUNDS = Number(arg('rounds', '3'));
const DELIVERIES = Number(arg('deliveries', '30000'));
const FANOUTS = arg('fanouts', '10,100').split(',').map(Number);
const ONLY = arg('only', '');
/** each webhook its own secret (as users create them), or one secret for all (as bench/procs.ts creates them) */
const SHARED_SECRET = process.argv.includes('--shared-secret');
/** svc's modules from dist/ (what `svc` runs: tsc's output, rebuilt here when stale) or from src/ through tsx */
const FROM = arg('from', 'dist');
const CONNECTIONS_PER_ORIGIN = 64; // the Deliverer's default
const CONCURRENCY = 256; // --delivery-concurrency's default (CONTRACT 1)
const ORG = 'org_bench';

// ------------------------------------------------------------------ svc's modules

if (FROM === 'dist') {
  const b = spawnSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { stdio: 'inherit', cwd: new URL('..', import.meta.url) });
  if (b.status !== 0) throw new Error('node scripts/build.mjs failed');
}
const BEFORE = arg('before', '');

/** svc's delivery modules from one build */
async function loadSvc(from: (p: string) => string) {
  const load = <T>(p: string): Promise<T> => import(from(p)) as Promise<T>;
  return {
    ...(await load<typeof import('../src/domain/clock.ts')>('domain/clock')),
    ...(await load<typeof import('../src/delivery/client.ts')>('delivery/client')),
    ...(await load<typeof import('../src/dispatch/registry.ts')>('dispatch/registry')),
    ...(await load<typeof import('../src/dataplane/pipeline.ts')>('dataplane/pipeline')),
    ...(await load<typeof import('../src/outcomes/batching-sink.ts')>('outcomes/batching-sink')),
    ...(await load<typeof import('../src/dataplane/signer.ts')>('dataplane/signer')),
  };
}
type Svc = Awaited<ReturnType<typeof loadSvc>>;
const SVC: Svc = await loadSvc((p) => (FROM === 'dist' ? `../dist/src/${p}.js` : `../src/${p}.ts`));
const SVC_BEFORE: Svc | null = BEFORE
  ? await loadSvc((p) => `${new URL(`file://${BEFORE.replace(/\/$/, '')}/`).href}dist/src/${p}.js`)
  : null;
const { CE_CONTENT_TYPE, PER_WEBHOOK_IN_FLIGHT } = SVC;

// ------------------------------------------------------------------ the receiver (a child process)

const RECEIVER = `
const http = require('node:http');
let requests = 0;
const server = http.createServer({ keepAliveTimeout: 60000 }, (req, res) => {
  req.on('data', () => {});
  req.on('end', () => { requests++; res.writeHead(204).end(); });
});
server.headersTimeout = 65000;
server.maxRequestsPerSocket = 0;
server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));
process.on('message', () => process.send(requests));
`;

async function startReceiver(): Promise<{ url: string; child: ChildProcess; requests(): Promise<number> }> {
  const child = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  return {
    url: `http://127.0.0.1:${line.toString().trim()}`,
    child,
    async requests() {
      child.send('count');
      const [n] = (await once(child, 'message')) as [number];
      return n;
    },
  };
}

// ------------------------------------------------------------------ the event

/** A CloudEvent body of the shape and size svc delivers for a workflow `started`, split at the workflow id (as bench/baseline.ts). */
function template(): string[] {
  const SENTINEL = 'bwf_SENTINEL';
  const ev = toCloudEvent(
    {
      kind: 'workflow',
      transition: 'started',
      org_id: ORG,
      time: new Date().toISOString(),
      workflow: { id: SENTINEL, type: 'provision', owner_id: 'inst_bench', owner_type: 'installs' },
      install_id: 'inst_bench',
    },
    { source: sourceFor('http://127.0.0.1:8080'), baseUrl: 'http://127.0.0.1:8080', dashboardUrl: 'http://127.0.0.1:8080/dashboard' },
  );
  if (!ev) throw new Error('the template event is not classified');
  return JSON.stringify(ev).split(SENTINEL);
}
const PARTS = template();
const bodyOf = (seq: number) => Buffer.from(PARTS.join(`bwf_${seq}`), 'utf8');

// ------------------------------------------------------------------ the floor

class FloorHook {
  private inFlight = 0;
  private readonly queue: Buffer[] = [];
  constructor(
    private readonly pool: Pool,
    private readonly path: string,
    private readonly delivered: () => void,
  ) {}

  offer(body: Buffer): void {
    if (this.inFlight < PER_WEBHOOK_IN_FLIGHT) this.send(body);
    else this.queue.push(body);
  }

  private send(body: Buffer): void {
    this.inFlight++;
    this.pool
      .request({ method: 'POST', path: this.path, headers: { 'content-type': CE_CONTENT_TYPE }, body })
      .then((res) => res.body.dump())
      .catch((err: unknown) => console.error('floor POST failed:', err))
      .finally(() => {
        this.inFlight--;
        this.delivered();
        const next = this.queue.shift();
        if (next !== undefined) this.send(next);
      });
  }
}

async function runFloor(url: string, fanout: number, events: number): Promise<void> {
  const pool = new Pool(url, { connections: CONNECTIONS_PER_ORIGIN, keepAliveTimeout: 10_000 });
  let left = fanout * events;
  let done!: () => void;
  const finished = new Promise<void>((r) => (done = r));
  const delivered = () => void (--left === 0 && done());
  const hooks = Array.from({ length: fanout }, (_, i) => new FloorHook(pool, `/h/${i}`, delivered));
  for (let e = 0; e < events; e++) {
    const body = bodyOf(e);
    for (const h of hooks) h.offer(body);
  }
  await finished;
  await pool.close();
}

// ------------------------------------------------------------------ svc

const silent = pino({ level: 'silent' });
const noProgress: ProgressStore = { save: async () => {} };

async function runSvc(svc: Svc, url: string, fanout: number, events: number): Promise<void> {
  const { systemClock, Deliverer, WebhookRegistry, DeliveryPipeline, BatchingOutcomeSink, makeSigner } = svc;
  const registry = new WebhookRegistry();
  for (let i = 0; i < fanout; i++) {
    const entry: WebhookEntry = {
      webhook_id: `wh_${i}`,
      org_id: ORG,
      url: `${url}/h/${i}`,
      secret: SHARED_SECRET ? 'whsec_bench' : `whsec_${Buffer.from(`bench secret ${i}`).toString('base64')}`,
      previous_secret: null,
      previous_secret_expires_at: null,
      interests: { all_events: true },
      match: null,
    };
    registry.upsert(entry);
  }
  // as src/dataplane/data-plane.ts assemble()
  const deliverer = new Deliverer({ timeoutMs: 5000, allowPrivateTargets: true, clock: systemClock });
  let outcomes = 0;
  const send = async (b: OutcomeBatch) => void (outcomes += b.outcomes.length);
  let pipeline: Pipeline;
  const sink = new BatchingOutcomeSink('bench', send, () => pipeline.inFlight(), systemClock, silent);
  pipeline = new DeliveryPipeline({
    registry,
    deliverer,
    sign: makeSigner(),
    outcomes: sink,
    progress: noProgress,
    clock: systemClock,
    logger: silent,
    concurrency: CONCURRENCY,
  });

  const route: EventRoute = {
    org: ORG,
    type: 'com.svc.workflow.started',
    resource: 'installs',
    op: 'provision',
    event: 'lifecycle.started',
    install: { id: 'inst_bench', labels: null },
    component: null,
    action: null,
    rev: 0,
  };
  let settled = 0;
  let done!: () => void;
  const finished = new Promise<void>((r) => (done = r));
  let next = 0;
  const feed = () => {
    for (let n = pipeline.room(); n > 0 && next < events; n--) {
      const seq = next++;
      const ev: InboundEvent = {
        id: `evt_${seq}`,
        route,
        body: bodyOf(seq),
        done: [],
        settle: () => void (++settled === events && done()),
        release: () => {
          throw new Error('released');
        },
      };
      pipeline.accept(ev);
    }
    if (next < events) pipeline.whenRoom(feed);
  };
  feed();
  await finished;
  await pipeline.drain();
  sink.close();
  await sink.flush();
  await deliverer.close(0);
  if (outcomes !== fanout * events) throw new Error(`svc: ${outcomes} outcomes for ${fanout * events} deliveries`);
}

// ------------------------------------------------------------------ the run

async function measure(run: () => Promise<void>, deliveries: number): Promise<{ cpuUs: number; wallMs: number }> {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  await run();
  const c = process.cpuUsage(c0);
  return { cpuUs: (c.user + c.system) / deliveries, wallMs: performance.now() - t0 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const rx = await startReceiver();
try {
  // warm-up: JIT, the receiver's connections
  if (ONLY !== 'svc') await runFloor(rx.url, 10, 500);
  if (ONLY !== 'floor') await runSvc(SVC, rx.url, 10, 500);
  if (SVC_BEFORE && !ONLY) await runSvc(SVC_BEFORE, rx.url, 10, 500);
  type Side = 'floor' | 'svc' | 'before';
  const run: Record<Side, (fanout: number, events: number) => Promise<void>> = {
    floor: (f, e) => runFloor(rx.url, f, e),
    svc: (f, e) => runSvc(SVC, rx.url, f, e),
    before: (f, e) => runSvc(SVC_BEFORE as Svc, rx.url, f, e),
  };
  const results = new Map<string, Record<Side, number[]>>();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const fanout of FANOUTS) {
      const events = Math.max(1, Math.round(DELIVERIES / fanout));
      const deliveries = events * fanout;
      const r = results.get(String(fanout)) ?? { floor: [], svc: [], before: [] };
      results.set(String(fanout), r);
      // rotate which side goes first
      const sides: Side[] = SVC_BEFORE ? ['floor', 'svc', 'before'] : ['floor', 'svc'];
      const order = [...sides.slice((round - 1) % sides.length), ...sides.slice(0, (round - 1) % sides.length)];
      const line: string[] = [];
      for (const side of order) {
        if (ONLY && side !== ONLY) continue;
        const before = await rx.requests();
        const m = await measure(() => run[side](fanout, events), deliveries);
        const got = (await rx.requests()) - before;
        if (got !== deliveries) throw new Error(`${side}: the receiver got ${got} of ${deliveries}`);
        r[side].push(m.cpuUs);
        line.push(`${side} ${m.cpuUs.toFixed(1)} µs/delivery (${Math.round(deliveries / (m.wallMs / 1000))}/s)`);
      }
      const ratio =
        r.floor.length === round && r.svc.length === round ? ` ratio ${(r.svc[round - 1] / r.floor[round - 1]).toFixed(2)}` : '';
      const was =
        r.floor.length === round && r.before.length === round ? ` (before ${(r.before[round - 1] / r.floor[round - 1]).toFixed(2)})` : '';
      console.log(`round ${round} x${fanout}: ${line.join(', ')}${ratio}${was}`);
    }
  }
  for (const [fanout, r] of results) {
    const f = r.floor.length ? median(r.floor) : NaN;
    const s = r.svc.length ? median(r.svc) : NaN;
    const ratios = r.floor.map((x, i) => r.svc[i] / x).filter(Number.isFinite);
    console.log(
      `x${fanout} median: floor ${f.toFixed(1)} µs, svc ${s.toFixed(1)} µs per delivery; ratio ` +
        `median ${ratios.length ? median(ratios).toFixed(2) : '-'} (rounds ${ratios.map((x) => x.toFixed(2)).join(', ')})`,
    );
    if (r.before.length) {
      const was = r.floor.map((x, i) => r.before[i] / x);
      const gain = r.before.map((x, i) => x - r.svc[i]);
      console.log(
        `x${fanout} before: ${median(r.before).toFixed(1)} µs per delivery; ratio median ${median(was).toFixed(2)} ` +
          `(rounds ${was.map((x) => x.toFixed(2)).join(', ')}); before − after median ${median(gain).toFixed(1)} µs ` +
          `(rounds ${gain.map((x) => x.toFixed(1)).join(', ')})`,
      );
    }
  }
} finally {
  rx.child.kill();
}
