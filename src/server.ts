// `svc serve`: composes the control plane (store, engine, registry replication, HTTP, dashboard)
// with one runtime (src/topology/: NATS mode or embedded mode, each with its bus, outbox hand-off
// and data plane) and starts them, in the order readiness promises (CONTRACT 1). Nothing here
// asks which runtime it runs on.
import { serve, type ServerType } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { openDb, type Db } from '../store/db.ts';
import { outboxSize } from '../store/outbox.ts';
import { recordIngestRejections } from '../store/ingest-rejections.ts';
import {
  DEFAULT_API_QUEUE_PER_ORG,
  DEFAULT_INGEST_RATE_PER_ORG,
  DEFAULT_AUDIT_RETENTION_MS,
  DEFAULT_EVENT_RETENTION_MS,
  DEFAULT_MAX_EVENTS_PER_ORG,
  effectiveBaseUrl,
  effectiveDashboardUrl,
  hostForUrl,
  type ServeConfig,
} from './config.ts';
import type { AppContext } from './context.ts';
import { systemClock, type Clock } from './domain/clock.ts';
import type { Bus } from './bus/bus.ts';
import { createMetrics, type Metrics } from './metrics.ts';
import { Engine } from './engine/engine.ts';
import { DeliveryStatusBook } from './outcomes/status-book.ts';
import { AUDIT_LOG, EventQuota, eventHistory, HistoryPruner } from './engine/history-pruner.ts';
import { LocalRunner } from './runner/local-runner.ts';
import { Scheduler } from './engine/scheduler.ts';
import { sourceFor } from './events/cloudevent.ts';
import { createHttpApp } from './http/app.ts';
import { FairAdmission } from './http/fair-admission.ts';
import { mountDashboard } from './dashboard/routes.tsx';
import { entryOf, RegistryReplicator } from './handoff/registry-replicator.ts';
import type { RelayFault } from './handoff/outbox-relay.ts';
import { ControlPlaneAttempts } from './dataplane/control-attempts.ts';
import { openTopology, type Topology } from './topology/open.ts';
import { Readiness } from './readiness.ts';
import { PortInUseError, StartAbortedError } from './start-errors.ts';

export { PortInUseError, StartAbortedError } from './start-errors.ts';

export interface ServerOptions {
  logger?: pino.Logger;
  clock?: Clock;
  replayWindowMs?: number;
  relayFault?: RelayFault;
  /**
   * Aborted: the start stops where it is (a NATS connect, a wait for readiness, anything), what it
   * started is stopped and closed, and startServer rejects with StartAbortedError (SIGTERM during
   * start-up, src/cli/serve.ts).
   */
  signal?: AbortSignal;
}

export interface RunningServer {
  url: string;
  ctx: AppContext;
  /** the bus this server uses (tests drive producers through it in memory mode) */
  bus: Bus;
  /** whether this process should get traffic (GET /readyz, CONTRACT 1) */
  readiness: Readiness;
  /**
   * Whether every event committed so far has been delivered (or failed) everywhere: nothing in the
   * outbox, nothing in the durable queue, nothing held by this process's data plane, and every
   * outcome that came back written (the attempt log and the delivery status are written in
   * batches). A test that waits for this can then assert that nothing more arrives or changes.
   */
  deliveryIdle(): Promise<boolean>;
  stop(): Promise<void>;
}

/**
 * `clock` is the engine's time: its timers (runner health checks, job re-sends, drift scans, the
 * local runner's heartbeats), the time of facts, a rotated secret's expiry. The delivery machinery
 * (timeouts, outcome batches, status writes) runs on real time whatever `clock` is, so a test can
 * move the engine's time without stopping deliveries. `replayWindowMs`: a test's shortened replay
 * window (src/bus/nats/jetstream.ts REPLAY_WINDOW_MS) for the data plane on this thread and the outcomes.
 * `relayFault`: crash tests only (src/cli/serve.ts).
 */
export async function startServer(config: ServeConfig, opts: ServerOptions = {}): Promise<RunningServer> {
  const logger = opts.logger ?? pino({ base: undefined, timestamp: pino.stdTimeFunctions.isoTime });
  // What start-up has started so far, each with its stop: a start that fails (the port is taken) or
  // is abandoned (SIGTERM) stops them, newest first, and leaves nothing open (the database closed,
  // no thread, no timer, no connection), so the process can exit and the next `svc serve` start.
  const undo: Array<() => unknown> = [];
  const step = <T>(p: Promise<T>, late?: (value: T) => unknown) => abortable(p, opts.signal, late);
  try {
    if (opts.signal?.aborted) throw new StartAbortedError();
    return await start(config, opts, logger, undo, step);
  } catch (err) {
    if (err instanceof StartAbortedError) logger.info('start-up abandoned: stopping what it had started');
    for (const stop of undo.reverse()) {
      try {
        await stop();
      } catch (e) {
        logger.warn({ err: e }, 'stopping what start-up had started');
      }
    }
    throw err;
  }
}

type Step = <T>(p: Promise<T>, late?: (value: T) => unknown) => Promise<T>;

async function start(
  config: ServeConfig,
  opts: ServerOptions,
  logger: pino.Logger,
  undo: Array<() => unknown>,
  step: Step,
): Promise<RunningServer> {
  const clock = opts.clock ?? systemClock;
  const db = openDb(config.db);
  undo.push(() => db.close());
  const metrics = createMetrics();
  // Ready means ready (CONTRACT 1): each part reports here (the topology adds its own); `listening on` waits for all of them.
  const readiness = new Readiness({
    http: 'the HTTP port is not bound yet',
    subscriptions: 'the bus subscriptions are not confirmed by the server yet',
  });
  const retention = config.eventRetentionMs ?? DEFAULT_EVENT_RETENTION_MS;
  const status = new DeliveryStatusBook(db, metrics, systemClock, logger, retention > 0 ? { engineClock: clock } : null);
  metrics.setInFlightSource(() => status.inFlight());
  undo.push(() => status.close());

  const topologyDeps = { config, db, logger, metrics, readiness, outcomes: status.apply.bind(status) };
  const topology = await step(
    openTopology({ ...topologyDeps, replayWindowMs: opts.replayWindowMs, relayFault: opts.relayFault }),
    closeTopology, // connected after the start was abandoned
  );
  undo.push(() => closeTopology(topology));
  const { bus } = topology;
  const replicator = new RegistryReplicator(db, topology.registry, logger, metrics);
  undo.push(() => replicator.close());
  await step(replicator.start()); // never holds up listening (CONTRACT 8): the sync catches up behind it
  const urls = { base: '', dashboard: '', source: '' };
  const engine = startEngine({ config, db, clock, logger, metrics, status, topology, replicator, urls, keepEvents: retention > 0 });
  undo.push(() => engine.close());
  const pruners = startPruners(config, { db, clock, logger, metrics, retention, queuedFrom: topology.historyQueuedFrom });
  // pings and resends: one signed attempt from the control plane, in fair slots, counted like any other
  const attempts = new ControlPlaneAttempts(
    { timeoutMs: config.deliveryTimeoutMs, allowPrivateTargets: config.allowPrivateTargets },
    { signClock: clock, record: (o) => status.record(o) },
  );
  undo.push(
    () => attempts.close(),
    () => pruners.close(),
  );

  const ctx = appContext({ config, db, clock, logger, metrics, readiness, status, engine, replicator, attempts, urls });
  const app = createHttpApp(ctx);
  mountDashboard(app, ctx); // under the dashboard URL's path, resolved per request (urls are set after listen)
  const server = await step(listen(app.fetch, config), (late) => late.close());
  undo.push(() => server.close());
  readiness.ready('http');
  const listenUrl = `http://${hostForUrl(config.host)}:${server.port}`;
  urls.base = effectiveBaseUrl(config, server.port).replace(/\/+$/, '');
  urls.dashboard = effectiveDashboardUrl(config, urls.base);
  urls.source = sourceFor(urls.base);

  undo.push(() => topology.drain()); // what the start below starts: the data plane (its attempts in flight finish)
  await step(topology.start()); // events: outbox → JetStream (NATS) or → the data plane (embedded), what was left first
  const work = await step(startWork(config, { bus, db, logger, clock, metrics, engine, status, topology }, undo));
  // One round trip after the last subscription of this connection (ingest, the local runner's jobs,
  // the relay's acks, the outcome consumer's pull): the server has them all, in order.
  await step(bus.flush());
  readiness.ready('subscriptions');
  const scheduler = new Scheduler(engine, clock, logger);
  scheduler.start({ runnerHealthIntervalMs: config.runnerHealthIntervalMs, driftIntervalMs: config.driftIntervalMs });
  undo.push(() => scheduler.stop());
  engine.kickJobs();
  const verifying = engine.resumeVerifications(); // the URLs are known now: verification requests carry them
  if (verifying) logger.info({ steps: verifying }, 'polling again the verification gates that were running at the last stop');

  await step(readiness.whenReady());
  if (opts.signal?.aborted) throw new StartAbortedError();
  logger.info({ url: listenUrl, base_url: urls.base, bus: bus.kind, delivery: topology.delivery }, `listening on ${listenUrl}`);
  return {
    url: listenUrl,
    ctx,
    bus,
    readiness,
    deliveryIdle: async () => outboxSize(db) === 0 && (await topology.idle()) && status.written(),
    stop: once(() => shutdown({ readiness, scheduler, work, topology, server, status, pruners, replicator, engine, attempts, db })),
  };
}

/**
 * Shutdown mirrors start-up (CONTRACT 1): /readyz says 503 first (traffic moves), then the ingest
 * subscription is drained: requests already received are committed and answered, later ones find
 * no responder here. HTTP answers until the drain is done.
 */
async function shutdown(o: {
  readiness: Readiness;
  scheduler: Scheduler;
  work: { stop(): Promise<void> };
  topology: Topology;
  server: { close(): Promise<void> };
  status: DeliveryStatusBook;
  pruners: { close(): void };
  replicator: RegistryReplicator;
  engine: Engine;
  attempts: ControlPlaneAttempts;
  db: Db;
}): Promise<void> {
  o.readiness.stopping();
  o.scheduler.stop();
  await o.work.stop();
  await o.topology.drain(); // the data plane: stop taking events, finish attempts in flight, leave the rest queued
  await o.server.close();
  await o.topology.close();
  o.status.close();
  o.pruners.close();
  await o.replicator.stop();
  o.engine.close();
  await o.topology.bus.close().catch(() => {});
  await o.attempts.close();
  o.db.close();
}

async function closeTopology(t: Topology): Promise<void> {
  await t.close();
  await t.bus.close().catch(() => {});
}

/** The engine, on the topology's bus and event queue; the delivery watchdog hears of the outcomes that may move it. */
function startEngine(o: {
  config: ServeConfig;
  db: Db;
  clock: Clock;
  logger: pino.Logger;
  metrics: Metrics;
  status: DeliveryStatusBook;
  topology: Topology;
  replicator: RegistryReplicator;
  urls: { base: string; source: string; dashboard: string };
  keepEvents: boolean;
}): Engine {
  const { replicator, logger } = o;
  const engine = new Engine({
    db: o.db,
    bus: o.topology.bus,
    clock: o.clock,
    logger,
    metrics: o.metrics,
    urls: () => o.urls,
    registryRev: () => replicator.version,
    keepEvents: o.keepEvents,
    recoveryOutcomes: o.status,
    webhookChanged: (orgId, webhookId) => replicator.changed(orgId, webhookId),
    allowPrivateTargets: o.config.allowPrivateTargets,
    queue: o.topology.queue,
  });
  // the delivery watchdog hears of the outcomes that may move it (CONTRACT 4.1)
  o.status.watchStreaks((outcome, streak) => {
    try {
      return engine.watchdog.outcome(outcome, streak);
    } catch (err) {
      // the outcome is counted all the same; the next one that may move the watchdog tries again
      logger.warn({ err, webhook_id: outcome.webhook_id }, 'the delivery watchdog could not record a transition');
      return false;
    }
  });
  return engine;
}

/**
 * What prunes by age and count: the event history (--event-retention, keeping what the topology has
 * still queued in it), the audit log, and --max-events-per-org (CONTRACT 8: an org's oldest events
 * past it are pruned, in turns of a few ms). One close for them all.
 */
function startPruners(
  config: ServeConfig,
  o: { db: Db; clock: Clock; logger: pino.Logger; metrics: Metrics; retention: number; queuedFrom: (() => number) | undefined },
): { close(): void } {
  const { db, clock, logger, retention } = o;
  const pruner = retention > 0 ? new HistoryPruner(db, clock, retention, logger, eventHistory(o.queuedFrom)) : null;
  const auditPruner = new HistoryPruner(db, clock, config.auditRetentionMs ?? DEFAULT_AUDIT_RETENTION_MS, logger, AUDIT_LOG);
  const maxEventsPerOrg = config.maxEventsPerOrg ?? DEFAULT_MAX_EVENTS_PER_ORG;
  const pruned = (n: number) => o.metrics.eventsPruned.inc({ reason: 'quota' }, n);
  const quota = retention > 0 && maxEventsPerOrg > 0 ? new EventQuota(db, clock, maxEventsPerOrg, logger, pruned, o.queuedFrom) : null;
  return {
    close() {
      pruner?.close();
      auditPruner.close();
      quota?.close();
    },
  };
}

/** What the API and the dashboard are given. */
function appContext(o: {
  config: ServeConfig;
  db: Db;
  clock: Clock;
  logger: pino.Logger;
  metrics: Metrics;
  readiness: Readiness;
  status: DeliveryStatusBook;
  engine: Engine;
  replicator: RegistryReplicator;
  attempts: ControlPlaneAttempts;
  urls: AppContext['urls'];
}): AppContext {
  const { config, engine, replicator, attempts } = o;
  return {
    db: o.db,
    clock: o.clock,
    config,
    logger: o.logger,
    metrics: o.metrics,
    engine,
    urls: o.urls,
    readiness: o.readiness,
    deliveryStatus: o.status,
    admission: new FairAdmission({ queuePerOrg: config.apiQueuePerOrg ?? DEFAULT_API_QUEUE_PER_ORG, metrics: o.metrics }),
    // replicated once the change is committed (a change is one transaction with its audit row, src/engine/engine.ts change)
    webhookChanged: (orgId, webhookId) => {
      engine.watchdog.forget(webhookId);
      engine.afterCommit(() => replicator.changed(orgId, webhookId));
    },
    registryRevision: () => replicator.version,
    attemptNow: (webhook, eventId, type, body, recovery) => attempts.attempt(entryOf(webhook), eventId, type, body, recovery),
  };
}

/**
 * What takes work once delivery runs: producer ingest (the topology's: a fact of an org whose deliveries
 * queue is held a moment to commit with others, src/ingest/group-commits.ts HOLD_MS) and the local runner.
 * Each is in `undo` as it starts; `stop` stops the runner and drains ingest.
 */
async function startWork(
  config: ServeConfig,
  o: {
    bus: Bus;
    db: Db;
    logger: pino.Logger;
    clock: Clock;
    metrics: Metrics;
    engine: Engine;
    status: DeliveryStatusBook;
    topology: Topology;
  },
  undo: Array<() => unknown>,
): Promise<{ stop(): Promise<void> }> {
  const { status } = o;
  const ingest = await o.topology.startIngest({
    engine: o.engine,
    backlogged: (orgId) => status.backlogged(orgId),
    ratePerOrg: config.ingestRatePerOrg ?? DEFAULT_INGEST_RATE_PER_ORG,
    refused: (rows) => recordIngestRejections(o.db, rows),
  });
  undo.push(() => ingest.drain());
  const localRunner = config.localRunner ? startLocalRunner(config, o) : null;
  undo.push(() => localRunner?.stop());
  return {
    async stop() {
      localRunner?.stop();
      await ingest.drain();
    },
  };
}

/** The HTTP server, bound: its port, and a close that resolves once it is closed. */
async function listen(
  fetch: (req: Request) => Response | Promise<Response>,
  config: ServeConfig,
): Promise<{ port: number; close(): Promise<void> }> {
  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve({ fetch, port: config.port, hostname: config.host }, () => resolve(s));
    s.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new PortInUseError(config.port, { cause: err }) : err),
    );
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** The in-process runner (--local-runner), after the jobs it had started before the last stop are queued again. */
function startLocalRunner(config: ServeConfig, o: { bus: Bus; db: Db; logger: pino.Logger; clock: Clock; engine: Engine }): LocalRunner {
  const runner = new LocalRunner(
    o.bus,
    o.db,
    o.logger,
    o.clock,
    Math.max(100, Math.min(Math.floor(config.runnerHealthIntervalMs / 3), 10_000)),
  );
  const resumed = o.engine.resumeLocalJobs();
  if (resumed) o.logger.info({ jobs: resumed }, 'running again the jobs the local runner had started before the last stop');
  runner.start();
  return runner;
}

/**
 * `p`, or StartAbortedError as soon as `signal` is aborted (p is left to finish; what it gives then
 * goes to `late`, to be closed).
 */
function abortable<T>(p: Promise<T>, signal: AbortSignal | undefined, late?: (value: T) => unknown): Promise<T> {
  if (!signal) return p;
  const dispose = (v: T) => {
    try {
      void Promise.resolve(late?.(v)).catch(() => {});
    } catch {
      // closing what came too late: nothing to report to
    }
  };
  if (signal.aborted) {
    p.then(dispose, () => {});
    return Promise.reject(new StartAbortedError());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      p.then(dispose, () => {});
      reject(new StartAbortedError());
    };
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** `f` run at the first call; every call gets that run's promise. */
function once(f: () => Promise<void>): () => Promise<void> {
  let run: Promise<void> | undefined;
  return () => (run ??= f());
}
