// svc as `npm start` runs it, for the `embedded` scenario: no NATS, the in-process bus, a SQLite
// file, svc's default delivery setup, started through svc's own startServer() from the built
// dist/ of the checkout under test (BENCH_SVC_ROOT), with the options of
// `svc serve --no-local-runner --allow-private-targets --drift-interval off --port 0 --db <fresh>`.
//
// The bench's producer speaks NATS, so this process also holds a bridge: a NATS subscription on
// svc.ingest.> (queue group svc-ingest) that sends each request into the in-process bus
// (bus.request on the same subject, which svc's ingest answers once the fact is committed) and
// relays svc's answer. The producer and the receiver are then the same as for every other system,
// and the bridge's cost (a NATS message in and out, one in-process request) is inside this
// process's CPU figure, i.e. counted against svc.
//
// Run by bench/run.ts: `node --import tsx bench/embedded-svc.ts`, with BENCH_SVC_ROOT,
// BENCH_NATS_URL and BENCH_DB in the environment. Prints "embedded ready <url>" once svc listens
// and the bridge is subscribed; on SIGTERM stops the bridge (drained), then svc, and exits.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { connect } from '@nats-io/transport-node';
import type { ServeConfig } from '../src/config.ts';
import type { RunningServer } from '../src/server.ts';
import { ingestWildcard } from '../src/bus/subjects.ts';

const root = process.env.BENCH_SVC_ROOT;
const natsUrl = process.env.BENCH_NATS_URL;
const db = process.env.BENCH_DB;
if (!root || !natsUrl || !db) throw new Error('BENCH_SVC_ROOT, BENCH_NATS_URL and BENCH_DB must be set');

/** A module of the checkout's build (dist/ mirrors src/ and store/: scripts/build.mjs). */
async function distModule<T>(rel: string): Promise<T> {
  const file = path.join(root!, 'dist', rel);
  if (!fs.existsSync(file)) throw new Error(`${file} is missing: run \`npm run build\` in ${root}`);
  return (await import(pathToFileURL(file).href)) as T;
}

console.log(`embedded svc from ${path.join(root, 'dist')}`);
// as `svc serve` tunes its heap (src/cli/heap.ts), when the checkout has it
const heapFile = path.join(root, 'dist', 'src/cli/heap.js');
if (fs.existsSync(heapFile)) ((await import(pathToFileURL(heapFile).href)) as { collectEagerly(): void }).collectEagerly();
const { startServer } = await distModule<{ startServer(config: ServeConfig): Promise<RunningServer> }>('src/server.js');
// svc serve's defaults as that checkout defines them (a checkout that lacks one gets the value of today's)
const defaults = await distModule<{ DEFAULT_DELIVERY_CONCURRENCY?: number; DEFAULT_EVENT_RETENTION_MS?: number }>('src/config.js');
const limits = await distModule<{ LIMITS?: { webhooksPerOrg?: number } }>('src/domain/limits.js');

/** What `svc serve` (src/cli/serve.ts toConfig) builds from the flags above and no environment. */
const config: ServeConfig = {
  port: 0,
  host: '127.0.0.1',
  db,
  natsUrl: null,
  baseUrl: null,
  dashboardUrl: null,
  localRunner: false,
  runnerHealthIntervalMs: 15 * 60_000,
  deliveryTimeoutMs: 5000,
  allowPrivateTargets: true,
  driftIntervalMs: null,
  deliveryConcurrency: defaults.DEFAULT_DELIVERY_CONCURRENCY ?? 256,
  deliver: true,
  natsCreds: null,
  deliveryThreads: null,
  maxWebhooksPerOrg: limits.LIMITS?.webhooksPerOrg ?? 10_000,
  eventRetentionMs: defaults.DEFAULT_EVENT_RETENTION_MS ?? 7 * 86_400_000,
  // CONTRACT §8's per-org shares lifted: nothing the bench measures is limited by them
  apiQueuePerOrg: 0,
  ingestRatePerOrg: 0,
  maxEventsPerOrg: 0,
};

const server = await startServer(config);
const nc = await connect({ servers: natsUrl, name: 'bench-embedded-bridge', noAsyncTraces: true });
const encoder = new TextEncoder();
let bridgeErrors = 0;
nc.subscribe(ingestWildcard, {
  queue: 'svc-ingest',
  callback: (err, m) => {
    if (err) return;
    server.bus.request(m.subject, m.data, { timeoutMs: 30_000 }).then(
      (reply) => m.respond(reply.data),
      (e: unknown) => {
        bridgeErrors++;
        m.respond(
          encoder.encode(JSON.stringify({ ok: false, error: { code: 'bridge', message: e instanceof Error ? e.message : String(e) } })),
        );
      },
    );
  },
});
await nc.flush();
console.log(`embedded ready ${server.url}`);

process.once('SIGTERM', () => {
  void (async () => {
    await nc.drain().catch(() => {});
    await server.stop();
    if (bridgeErrors) console.error(`embedded bridge: ${bridgeErrors} requests failed`);
    process.exit(0);
  })();
});
