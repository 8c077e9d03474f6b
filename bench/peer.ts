// The durable peer: what a TypeScript team would build instead of svc, with Redis + BullMQ + undici.
// Two processes, as such a team would deploy them:
//
//   ingest  subscribes svc.ingest.> on the bench's NATS (queue group), and for each fact adds one
//           BullMQ job carrying the CloudEvent body (jobId = the org and the workflow id of the
//           subject, so a fact sent again is not queued twice while its job is kept), and answers
//           {"ok":true} only once Redis has the job.
//   worker  a BullMQ Worker: each job is POSTed to every webhook of its org, HMAC-signed
//           (X-Svc-Signature: lowercase hex HMAC-SHA256 of the body, a secret per webhook), with
//           svc's bounds: 8 POSTs in flight per webhook (FIFO behind), 256 in the process, 64
//           connections per origin, 5 s per POST; the job completes once every POST has an outcome.
//
// Redis is the bench's own redis-server (appendonly yes, appendfsync everysec: a job survives a
// crash of either process, and at most about a second of them a crash of Redis; bench/procs.ts).
// The body is the floor's (bench/fanout.ts), so the peer and the floor deliver the same bytes.
// Never imported by svc: a dev dependency of the bench only.
//
// Run by bench/run.ts: `node --import tsx bench/peer.ts ingest|worker`, with BENCH_NATS_URL (ingest),
// BENCH_REDIS_PORT and BENCH_TARGETS ({"<org_id>": ["http://…/h/0", …]}) in the environment.
// Prints "ready" once it takes work; exits on SIGTERM after finishing what it holds.
import { connect } from '@nats-io/transport-node';
import { Queue, Worker, type Job } from 'bullmq';
import { Pool } from 'undici';
import { ingestWildcard } from '../src/bus/subjects.ts';
import { cloudEventTemplate, CONNECTIONS_PER_ORIGIN, eventBody, ProcessSlots, WebhookLane } from './fanout.ts';

/** The BullMQ queue both processes use. */
const QUEUE = 'svc-peer-events';
/** POSTs in flight per process, all webhooks together: svc's default --delivery-concurrency. */
const PROCESS_IN_FLIGHT = 256;
/** Whole-exchange timeout per POST: svc's default --delivery-timeout. */
const TIMEOUT_MS = 5000;
/**
 * Jobs the worker holds at once. As svc's data plane pulls up to 256 events at a time: enough that
 * the 256 POST slots are never idle for want of a job at either fan-out.
 */
const WORKER_JOBS = Number(process.env.BENCH_PEER_JOBS ?? '') || 256;
/**
 * How long a finished job is kept: its jobId refuses a repeated fact for that long (the dedup
 * window; svc's is its workflow row, kept for ever), and Redis stays small over a bench run.
 */
const KEEP_FINISHED_S = 600;

interface EventJob {
  org: string;
  /** the CloudEvent, as it will be POSTed */
  body: string;
}

const role = process.argv[2];
const redisPort = Number(process.env.BENCH_REDIS_PORT);
const targets = JSON.parse(process.env.BENCH_TARGETS ?? '{}') as Record<string, string[]>;
if (!Number.isInteger(redisPort) || redisPort <= 0) throw new Error('BENCH_REDIS_PORT is not set');
// Workers need maxRetriesPerRequest null (BullMQ's blocking commands); the ingest's adds fail
// fast rather than queue up while Redis is away.
const connection = { host: '127.0.0.1', port: redisPort, maxRetriesPerRequest: role === 'worker' ? null : 1 };

interface WorkflowFact {
  kind?: unknown;
  workflow?: { id?: unknown };
}

const decoder = new TextDecoder();

/** The producer's fact, or null when it is not JSON. */
function parseFact(data: Uint8Array): WorkflowFact | null {
  try {
    return JSON.parse(decoder.decode(data)) as WorkflowFact;
  } catch {
    return null;
  }
}

async function runIngest(): Promise<() => Promise<void>> {
  const natsUrl = process.env.BENCH_NATS_URL;
  if (!natsUrl) throw new Error('BENCH_NATS_URL is not set');
  const templates = new Map(Object.keys(targets).map((org) => [org, cloudEventTemplate(org)]));
  const queue = new Queue<EventJob>(QUEUE, {
    connection,
    defaultJobOptions: { attempts: 1, removeOnComplete: { age: KEEP_FINISHED_S }, removeOnFail: { age: KEEP_FINISHED_S } },
  });
  await queue.waitUntilReady();
  const nc = await connect({ servers: natsUrl, name: 'bench-peer-ingest', noAsyncTraces: true });
  const OK = new TextEncoder().encode('{"ok":true}');
  const REFUSED = new TextEncoder().encode('{"ok":false}');
  let refused = 0;
  nc.subscribe(ingestWildcard, {
    queue: 'svc-ingest',
    callback: (err, m) => {
      if (err) return;
      // svc.ingest.<org>.workflows.<wf>; the fact itself is parsed, as a real ingest would
      const t = m.subject.split('.');
      const template = templates.get(t[2]);
      const fact = parseFact(m.data);
      if (!template || t[3] !== 'workflows' || fact?.kind !== 'workflow' || fact.workflow?.id !== t[4]) {
        refused++;
        m.respond(REFUSED);
        return;
      }
      queue.add('event', { org: t[2], body: eventBody(template, t[4]).toString('utf8') }, { jobId: `${t[2]}.${t[4]}` }).then(
        () => m.respond(OK),
        (e: unknown) => {
          refused++;
          if (refused <= 5) console.error('peer ingest: add failed:', e instanceof Error ? e.message : e);
          m.respond(REFUSED);
        },
      );
    },
  });
  await nc.flush();
  return async () => {
    await nc.drain().catch(() => {});
    await queue.close();
    if (refused) console.error(`peer ingest: ${refused} facts refused`);
  };
}

async function runWorker(): Promise<() => Promise<void>> {
  let failures = 0;
  const outcome = (delivered: boolean, err: unknown) => {
    if (delivered) return;
    failures++;
    if (failures <= 5) console.error('peer POST failed:', err instanceof Error ? err.message : (err ?? 'not 2xx'));
  };
  const slots = new ProcessSlots(PROCESS_IN_FLIGHT);
  const pools = new Map<string, Pool>();
  const lanesOf = new Map<string, WebhookLane[]>();
  for (const [org, urls] of Object.entries(targets)) {
    lanesOf.set(
      org,
      urls.map((u, i) => {
        const url = new URL(u);
        let pool = pools.get(url.origin);
        if (!pool) pools.set(url.origin, (pool = new Pool(url.origin, { connections: CONNECTIONS_PER_ORIGIN, keepAliveTimeout: 10_000 })));
        return new WebhookLane(pool, url.pathname + url.search, {
          slots,
          timeoutMs: TIMEOUT_MS,
          secret: `whsec_peer_${org}_${i}`,
          outcome,
        });
      }),
    );
  }
  const deliver = (job: Job<EventJob>) =>
    new Promise<void>((resolve) => {
      const lanes = lanesOf.get(job.data.org) ?? [];
      if (!lanes.length) return resolve();
      const body = Buffer.from(job.data.body, 'utf8');
      let left = lanes.length;
      const settled = () => {
        if (--left === 0) resolve();
      };
      for (const lane of lanes) lane.offer(body, settled);
    });
  const worker = new Worker<EventJob>(QUEUE, deliver, { connection, concurrency: WORKER_JOBS });
  worker.on('error', (e) => console.error('peer worker:', e.message));
  await worker.waitUntilReady();
  return async () => {
    await worker.close();
    await Promise.allSettled([...pools.values()].map((p) => p.close()));
    if (failures) console.error(`peer worker: ${failures} POSTs failed`);
  };
}

if (role !== 'ingest' && role !== 'worker') throw new Error('usage: bench/peer.ts ingest|worker');
const stop = role === 'ingest' ? await runIngest() : await runWorker();
console.log('ready');
process.once('SIGTERM', () => {
  void stop().finally(() => process.exit(0));
});
