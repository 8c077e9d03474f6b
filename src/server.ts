// `svc serve`: the control plane (store, engine, outbox relay, registry relay, HTTP, dashboard)
// and, unless --no-deliver, a data plane: worker threads on JetStream (NATS mode), or a thread fed
// by the outbox (embedded mode, src/topology/embedded.ts).
import os from 'node:os';
import { serve, type ServerType } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { openDb } from '../store/db.ts';
import { outboxSize } from '../store/outbox.ts';
import { DEFAULT_EVENT_RETENTION_MS, effectiveBaseUrl, effectiveDashboardUrl, hostForUrl, type ServeConfig } from './config.ts';
import type { AppContext } from './context.ts';
import { systemClock, type Clock } from './domain/clock.ts';
import { createMemoryBus } from './bus/memory.ts';
import { createNatsBus, redactNatsUrl, type NatsBus } from './bus/nats.ts';
import type { Bus } from './bus/bus.ts';
import { ensureLayout, EVENTS_STREAM, REGISTRY_BUCKET } from './bus/jetstream.ts';
import { KvRegistryPublisher } from './bus/kv-registry.ts';
import { Seal } from './bus/seal.ts';
import { createMetrics } from './metrics.ts';
import { Deliverer } from './delivery/client.ts';
import { WebhookSubscriber } from './dispatch/subscriber.ts';
import { Engine } from './engine/engine.ts';
import { DeliveryStatusBook } from './outcomes/status-book.ts';
import { HistoryPruner } from './engine/history.ts';
import { outcomeOf, RECOVERY_HEADER } from './outcomes/outcome.ts';
import { LocalRunner } from './runner/local-runner.ts';
import { Scheduler } from './engine/scheduler.ts';
import { startIngest } from './ingest/ingest.ts';
import { consumeOutcomes } from './outcomes/consumer.ts';
import { sourceFor } from './events/cloudevent.ts';
import { createHttpApp } from './http/app.ts';
import { mountDashboard } from './dashboard/routes.tsx';
import { entryOf, RegistryRelay, type RegistryPublisher } from './relay/registry.ts';
import { JetStreamRelay } from './relay/jetstream-relay.ts';
import { JetStreamPublisher } from './bus/jetstream-publisher.ts';
import { natsConnectOptions } from './bus/nats-auth.ts';
import type { OutboxRow } from '../store/outbox.ts';
import { resolveDataplaneKey } from './relay/dataplane-key.ts';
import { embeddedTopology, type EmbeddedTopology } from './topology/embedded.ts';
import { startNatsDataPlane, type DataPlane, type DeliveryLimits } from './dataplane/data-plane.ts';
import { DeliveryThreads } from './dataplane/threads.ts';
import { makeSigner } from './dataplane/signer.ts';
import { Readiness, trackNatsConnection } from './readiness.ts';

export interface RunningServer {
  url: string;
  ctx: AppContext;
  /** the bus this server uses (tests drive producers through it in memory mode) */
  bus: Bus;
  /** whether this process should get traffic (GET /readyz, CONTRACT 1) */
  readiness: Readiness;
  /**
   * Whether every event committed so far has been delivered (or failed) everywhere: nothing in the
   * outbox, nothing in the durable queue, nothing held by this process's data plane. A test that
   * waits for this can then assert that nothing more arrives.
   */
  deliveryIdle(): Promise<boolean>;
  stop(): Promise<void>;
}

/** Delivery threads for this machine: one per spare core, at least one. */
export function defaultDeliveryThreads(): number {
  return Math.max(1, (os.availableParallelism?.() ?? os.cpus().length) - 1);
}

/**
 * `clock` is the engine's time: its timers (runner health checks, job re-sends, drift scans, the
 * local runner's heartbeats), the time of facts, a rotated secret's expiry. The delivery machinery
 * (timeouts, outcome batches, status writes) runs on real time whatever `clock` is, so a test can
 * move the engine's time without stopping deliveries. `replayWindowMs`: a test's shortened replay
 * window (src/bus/jetstream.ts REPLAY_WINDOW_MS) for the data plane on this thread and the outcomes.
 */
export async function startServer(config: ServeConfig, opts: { logger?: pino.Logger; clock?: Clock; replayWindowMs?: number } = {}): Promise<RunningServer> {
  const logger = opts.logger ?? pino({ base: undefined, timestamp: pino.stdTimeFunctions.isoTime });
  const clock = opts.clock ?? systemClock;
  const db = openDb(config.db);
  const metrics = createMetrics();
  const key = resolveDataplaneKey(db, config.natsCreds);
  const seal = new Seal(key);
  const limits: DeliveryLimits = { concurrency: config.deliveryConcurrency, timeoutMs: config.deliveryTimeoutMs, allowPrivateTargets: config.allowPrivateTargets };
  // Ready means ready (CONTRACT 1): each part reports here; `listening on` waits for all of them.
  const readiness = new Readiness({
    http: 'the HTTP port is not bound yet',
    subscriptions: 'the bus subscriptions are not confirmed by the server yet',
    delivery: 'the outbox relay and the consumers have not started yet',
  });

  let nats: NatsBus | null = null;
  if (config.natsUrl) {
    if (!config.natsCreds) logger.warn({ url: redactNatsUrl(config.natsUrl) }, 'no --nats-creds: anyone who can reach this NATS server can act as any org (see svc nats init)');
    nats = await createNatsBus(config.natsUrl, { name: 'svc', logger, role: 'engine', credsFile: config.natsCreds });
    trackNatsConnection(nats.nc, readiness);
    try {
      await ensureLayout(nats.nc, await jetstreamManager(nats.nc, { timeout: 10_000 }));
    } catch (err) {
      await nats.close();
      const msg = (err as Error)?.message ?? String(err);
      const hint = /jetstream not enabled|JetStreamNotEnabled|503/i.test(msg) ? ' (start nats-server with JetStream enabled: -js)' : '';
      throw new Error(`NATS setup failed at ${redactNatsUrl(config.natsUrl)}: ${msg}${hint}`, { cause: err });
    }
  }
  const bus: Bus = nats ?? createMemoryBus({ logger });
  const js = nats ? jetstream(nats.nc, { timeout: 10_000 }) : null;

  const retention = config.eventRetentionMs ?? DEFAULT_EVENT_RETENTION_MS;
  const status = new DeliveryStatusBook(db, metrics, systemClock, logger, retention > 0 ? { engineClock: clock } : null);
  metrics.setInFlightSource(() => status.inFlight());

  // embedded mode: the registry, the mirror to svc.events.> and the data plane on its own thread
  const embedded: EmbeddedTopology | null = nats
    ? null
    : embeddedTopology({ db, dbFile: config.db, bus, limits, thread: config.deliveryThreads !== 0, outcomes: (b) => status.apply(b), logger });
  // the webhook registry the data plane matches with: NATS KV, or in process
  const publisher: RegistryPublisher = js ? new KvRegistryPublisher(await new Kvm(js).open(REGISTRY_BUCKET), seal) : embedded!.registry;
  const registryRelay = new RegistryRelay(db, publisher, logger, metrics);
  await registryRelay.start(); // never holds up listening (CONTRACT 8): the sync catches up behind it

  const urls = { base: '', dashboard: '', source: '' };
  let outboxChanged: (rows: OutboxRow[]) => void = () => {};
  let deliveryQueued: () => void = () => {};
  // NATS mode: the outbox relay gives each outbox row its batch (in the engine's commits and a
  // recovery's) and deletes what JetStream stored inside the engine's next commit
  const eventPublisher = nats ? new JetStreamPublisher(nats.nc, natsConnectOptions({ servers: [], name: 'svc', role: 'engine' }).inboxPrefix!) : null;
  const jsRelay = eventPublisher ? new JetStreamRelay(db, eventPublisher, seal, logger, metrics) : null;
  const outboxBatch = jsRelay ? (eventId: string, bytes: number) => jsRelay.assign(eventId, bytes) : () => null;
  const engine = new Engine({
    db,
    bus,
    clock,
    logger,
    metrics,
    urls: () => urls,
    registryRev: () => registryRelay.version,
    outboxChanged: (rows) => outboxChanged(rows),
    keepEvents: retention > 0,
    ...(jsRelay ? { outboxBatch, piggyback: jsRelay.piggyback } : {}),
  });
  const pruner = retention > 0 ? new HistoryPruner(db, clock, retention, logger) : null;

  // pings: one signed attempt from the control plane, counted like any other
  const pinger = new Deliverer({ timeoutMs: config.deliveryTimeoutMs, allowPrivateTargets: config.allowPrivateTargets });
  const sign = makeSigner();

  const ctx: AppContext = {
    db,
    clock,
    config,
    logger,
    metrics,
    engine,
    urls,
    readiness,
    webhookChanged: (orgId, webhookId) => registryRelay.changed(orgId, webhookId),
    registryRevision: () => registryRelay.version,
    deliveryStatus: status,
    async attemptNow(webhook, eventId, type, body, recovery) {
      const sub = new WebhookSubscriber(entryOf(webhook));
      const headers = sign(sub, eventId, body, clock.now());
      if (recovery) headers[RECOVERY_HEADER] = recovery;
      const r = await pinger.attempt(webhook.url, headers, body);
      status.record(outcomeOf({ webhook_id: webhook.webhook_id, org_id: webhook.org_id, event_id: eventId, type, recovery_id: recovery }, r, systemClock.now()));
      return r;
    },
    deliveryQueued: () => deliveryQueued(),
    outboxBatch,
  };

  const app = createHttpApp(ctx);
  mountDashboard(app, ctx); // under the dashboard URL's path, resolved per request (urls are set after listen)

  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, () => resolve(s));
    s.once('error', reject);
  });
  const port = (server.address() as AddressInfo).port;
  readiness.ready('http');
  const listenUrl = `http://${hostForUrl(config.host)}:${port}`;
  urls.base = effectiveBaseUrl(config, port).replace(/\/+$/, '');
  urls.dashboard = effectiveDashboardUrl(config, urls.base);
  urls.source = sourceFor(urls.base);

  // events: outbox → JetStream (NATS) or → the in-process data plane (embedded)
  let dataPlane: DataPlane | null = null;
  let threads: DeliveryThreads | null = null;
  let outcomes: { stop(): Promise<void> } | null = null;
  if (js && nats && jsRelay) {
    outboxChanged = (rows) => jsRelay.handoff(rows);
    deliveryQueued = () => jsRelay.reread();
    outcomes = await consumeOutcomes(js, seal, (b) => status.apply(b), logger, { replayWindowMs: opts.replayWindowMs });
    if (config.deliver) {
      const n = config.deliveryThreads ?? defaultDeliveryThreads();
      const processId = randomUUID().slice(0, 8);
      if (n > 0) {
        threads = new DeliveryThreads(
          n,
          { natsUrl: config.natsUrl!, credsFile: config.natsCreds, key: key.toString('base64'), limits: { ...limits, concurrency: Math.max(1, Math.ceil(limits.concurrency / n)) }, workerIdPrefix: `serve_${processId}`, logLevel: logger.level },
          logger,
        );
        await threads.start();
      } else {
        dataPlane = await startNatsDataPlane({ nc: nats.nc, seal, limits, workerId: `serve_${processId}`, clock: systemClock, logger, replayWindowMs: opts.replayWindowMs });
      }
    }
  } else if (embedded) {
    outboxChanged = (rows) => embedded.outboxChanged(rows);
    deliveryQueued = () => embedded.deliveryQueued();
    await embedded.start(); // hands over what was committed before a stop or a crash
  }

  const ingestSub = startIngest({ bus, logger, metrics, engine });
  const localRunner = config.localRunner
    ? new LocalRunner(bus, db, logger, clock, Math.max(100, Math.min(Math.floor(config.runnerHealthIntervalMs / 3), 10_000)))
    : null;
  if (localRunner) {
    const resumed = engine.resumeLocalJobs();
    if (resumed) logger.info({ jobs: resumed }, 'running again the jobs the local runner had started before the last stop');
    localRunner.start();
  }
  // One round trip after the last subscription of this connection (ingest, the local runner's jobs,
  // the relay's acks, the outcome consumer's pull): the server has them all, in order.
  await bus.flush();
  readiness.ready('subscriptions');
  const scheduler = new Scheduler(engine, clock, logger);
  scheduler.start({ runnerHealthIntervalMs: config.runnerHealthIntervalMs, driftIntervalMs: config.driftIntervalMs });
  jsRelay?.kick(); // what was committed before a stop or a crash and not yet published or delivered
  engine.kickJobs();
  readiness.ready('delivery'); // the relay runs, the consumers and delivery threads pull (each confirmed)

  await readiness.whenReady();
  logger.info({ url: listenUrl, base_url: urls.base, bus: bus.kind, delivery: config.deliver ? (threads ? `${config.deliveryThreads ?? defaultDeliveryThreads()} threads` : (embedded?.delivery ?? 'in process')) : 'off' }, `listening on ${listenUrl}`);

  const jsm = nats ? await jetstreamManager(nats.nc, { timeout: 10_000 }) : null;
  let stopping: Promise<void> | null = null;
  return {
    url: listenUrl,
    ctx,
    bus,
    readiness,
    async deliveryIdle() {
      if (outboxSize(db) > 0) return false;
      if (dataPlane && (dataPlane.pipeline.held() > 0 || dataPlane.pipeline.inFlight() > 0)) return false;
      if (embedded && !(await embedded.idle())) return false;
      if (jsm && (await jsm.streams.info(EVENTS_STREAM)).state.messages > 0) return false;
      return true;
    },
    stop: () =>
      (stopping ??= (async () => {
        // Shutdown mirrors start-up (CONTRACT 1): /readyz says 503 first (traffic moves), then
        // the ingest subscription is drained: requests already received are committed and
        // answered, later ones find no responder here. HTTP answers until the drain is done.
        readiness.stopping();
        scheduler.stop();
        localRunner?.stop();
        await ingestSub.drain();
        // the data plane: stop taking events, finish attempts in flight, leave the rest queued
        await Promise.all([threads?.drain(), dataPlane?.drain(), embedded?.stop()]);
        await new Promise<void>((r) => server.close(() => r()));
        await jsRelay?.close();
        eventPublisher?.close();
        await outcomes?.stop();
        status.close();
        pruner?.close();
        await Promise.race([registryRelay.settled(), new Promise((r) => setTimeout(r, 2000))]);
        registryRelay.close();
        engine.close();
        await bus.close().catch(() => {});
        await pinger.close(0);
        db.close();
      })()),
  };
}
