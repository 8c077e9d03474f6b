// One side of the `ingest-stream` scenario (bench/ingest-stream.ts): an engine on a SQLite file of its
// own, as bench/ingest-engine.ts builds it (events queued in their history rows, no relay, no
// delivery), that producers reach over NATS by one of two paths:
//   direct  the engine answers svc.ingest.> itself after its commit (src/ingest/ingest.ts startIngest:
//           svc serve's path before durable ingest, and embedded mode's);
//   stream  an ingest gate stores each fact in SVC_FACTS and answers, and the engine applies the
//           stream (src/ingest/gate.ts, src/ingest/fact-stream.ts: CONTRACT 9, svc serve's path now).
// The same engine, connection options and org either way: what differs is the path alone. Prints
// `ready <org id>`, and answers `bench.applied` with the facts the engine has applied so far (its
// workflows), so that the stream's rate is of facts applied, not only stored.
//   BENCH_NATS_URL (comma-separated for a cluster), BENCH_PATH direct|stream, BENCH_REPLICAS (stream),
//   BENCH_DB (a file that does not exist yet)
import pino from 'pino';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { createMemoryBus } from '../src/bus/memory.ts';
import { createNatsBus } from '../src/bus/nats/nats-connection.ts';
import { ensureLayout, FACTS_STREAM } from '../src/bus/nats/jetstream.ts';
import { INBOX_PREFIX } from '../src/bus/subjects.ts';
import { systemClock } from '../src/domain/clock.ts';
import { Engine } from '../src/engine/engine.ts';
import { relayEventQueue } from '../src/handoff/relay-event-queue.ts';
import { applyFactStream } from '../src/ingest/fact-stream.ts';
import { startGate } from '../src/ingest/gate.ts';
import { startIngest } from '../src/ingest/ingest.ts';
import { createMetrics } from '../src/metrics.ts';
import { openDb } from '../store/db.ts';
import { recordIngestRejections } from '../store/ingest-rejections.ts';
import { createOrg, getOrg } from '../store/orgs.ts';

const url = process.env.BENCH_NATS_URL!;
const which = process.env.BENCH_PATH;
if (which !== 'direct' && which !== 'stream') throw new Error('BENCH_PATH: direct or stream');
const db = openDb(process.env.BENCH_DB!);
const orgId = createOrg(db, 'bench-ingest-path').org.org_id;
const logger = pino({ level: 'warn' });
const metrics = createMetrics({ defaultMetrics: false });
const urls = { base: 'http://127.0.0.1:8080', source: '//127.0.0.1:8080/ctl-api', dashboard: 'http://127.0.0.1:8080/dashboard' };
// batches as the relay would make them (one per group), no relay: as bench/ingest-engine.ts
let batch = '';
const relay = {
  assign: (eventId: string) => (batch ||= eventId),
  handoff: () => void (batch = ''),
  piggyback: { write() {}, committed() {}, rolledBack() {} },
};
const engine = new Engine({
  db,
  bus: createMemoryBus({ logger }),
  clock: systemClock,
  logger,
  metrics,
  urls: () => urls,
  registryRev: () => 1,
  queue: relayEventQueue(db, relay, relay, () => true),
});

const bus = await createNatsBus(url, { name: `bench-${which}`, logger });
const nc = bus.nc;
if (which === 'direct') {
  startIngest({ bus, logger, metrics, engine });
} else {
  const js = jetstream(nc, { timeout: 10_000 });
  const jsm = await jetstreamManager(nc, { timeout: 10_000, checkAPI: false });
  // a stream of this side's own: another side's facts are of another database's org
  await jsm.streams.delete(FACTS_STREAM).catch(() => {});
  await ensureLayout(nc, jsm, { replicas: Number(process.env.BENCH_REPLICAS ?? 1), logger });
  // the org known at once, as svc serve's gate remembers the orgs it has seen (src/topology/nats.ts databaseOrgs)
  startGate({
    nc,
    logger,
    metrics,
    clock: systemClock,
    gateId: 'bench',
    inboxPrefix: INBOX_PREFIX.engine,
    orgs: { synced: true, whenSynced: async () => {}, has: (org) => org === orgId || getOrg(db, org) !== undefined },
  });
  await applyFactStream({ js, nc, db, engine, logger, metrics, clock: systemClock, refused: (rows) => recordIngestRejections(db, rows) });
}
const applied = db.prepare('SELECT count(*) FROM workflows').pluck();
nc.subscribe('bench.applied', { callback: (_err, m) => void m.respond(String(applied.get())) });
await nc.flush();
// a plain exit, so that --cpu-prof (BENCH_SVC_NODE_ARGS) writes its profile
process.once('SIGTERM', () => process.exit(0));
console.log(`ready ${orgId}`);
