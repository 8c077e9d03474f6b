// `svc serve`: wires store → engine → bus → dispatch → delivery, and the HTTP layer.
import { serve, type ServerType } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { openDb } from '../store/db.ts';
import { effectiveBaseUrl, effectiveDashboardUrl, hostForUrl, type ServeConfig } from './config.ts';
import type { AppContext } from './context.ts';
import { createMemoryBus } from './bus/memory.ts';
import { createNatsBus } from './bus/nats.ts';
import type { Bus } from './bus/bus.ts';
import { createMetrics } from './metrics.ts';
import { Deliverer } from './delivery/client.ts';
import { Engine } from './engine/engine.ts';
import { Producers } from './engine/producers.ts';
import { Orchestrator } from './orchestrator/runtime.ts';
import { LocalRunner } from './orchestrator/local-runner.ts';
import { Dispatcher } from './dispatch/dispatcher.ts';
import { startIngest } from './ingest/ingest.ts';
import { sourceFor } from './events/cloudevent.ts';
import { controlSubject } from './bus/subjects.ts';
import { createHttpApp } from './http/app.ts';
import { Scheduler } from './orchestrator/scheduler.ts';
import { mountDashboard } from './dashboard/routes.tsx';
import { systemClock, type Clock } from './domain/clock.ts';

export interface RunningServer {
  url: string;
  ctx: AppContext;
  /** the bus this server uses (tests drive producers through it in memory mode) */
  bus: Bus;
  stop(): Promise<void>;
}

export async function startServer(config: ServeConfig, opts: { logger?: pino.Logger; clock?: Clock } = {}): Promise<RunningServer> {
  const logger = opts.logger ?? pino({ base: undefined, timestamp: pino.stdTimeFunctions.isoTime });
  const db = openDb(config.db);
  const metrics = createMetrics();
  const bus: Bus = config.natsUrl ? await createNatsBus(config.natsUrl, { name: 'svc', logger }) : createMemoryBus({ logger });
  const urls = { base: '', dashboard: '', source: '' };
  const processId = randomUUID();
  const clock = opts.clock ?? systemClock;
  const deliverer = new Deliverer({ timeoutMs: config.deliveryTimeoutMs, allowPrivateTargets: config.allowPrivateTargets, logger, metrics, clock });
  const engine = new Engine({ db, bus, logger, metrics, urls: () => urls });
  const orchestrator = new Orchestrator(engine, logger);
  const producers = new Producers(orchestrator);
  const dispatcher = new Dispatcher(db, deliverer, logger);

  const ctx: AppContext = {
    db,
    clock,
    config,
    logger,
    metrics,
    deliverer,
    engine,
    orchestrator,
    urls,
    // other svc processes on the same bus hear about changes too (their dispatch indexes refresh)
    webhookChanged: (orgId, webhookId) => {
      dispatcher.refresh(orgId, webhookId);
      bus.publish(controlSubject, JSON.stringify({ kind: 'webhook', org_id: orgId, webhook_id: webhookId, from: processId }));
    },
    labelsChanged: (installId) => {
      dispatcher.invalidateLabels();
      bus.publish(controlSubject, JSON.stringify({ kind: 'labels', install_id: installId, from: processId }));
    },
  };

  const app = createHttpApp(ctx);
  mountDashboard(app, ctx); // under the dashboard URL's path, resolved per request (urls are set after listen)

  const server: ServerType = await new Promise((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, () => resolve(s));
    s.once('error', reject);
  });
  const port = (server.address() as AddressInfo).port;
  const listenUrl = `http://${hostForUrl(config.host)}:${port}`;
  urls.base = effectiveBaseUrl(config, port).replace(/\/+$/, '');
  urls.dashboard = effectiveDashboardUrl(config, urls.base);
  urls.source = sourceFor(urls.base);

  const eventSub = await bus.consumeEvents(async (_subject, data) => {
    dispatcher.dispatch(data);
  });
  const controlSub = bus.subscribe(controlSubject, (msg) => {
    const m = msg.json<{ kind: string; org_id?: string; webhook_id?: string; from?: string }>();
    if (m.from === processId) return;
    if (m.kind === 'webhook' && m.org_id && m.webhook_id) dispatcher.refresh(m.org_id, m.webhook_id);
    if (m.kind === 'labels') dispatcher.invalidateLabels();
  });
  const ingestSub = startIngest({ bus, logger, metrics, orchestrator, producers });
  const localRunner = config.localRunner
    ? new LocalRunner(bus, db, logger, Math.max(100, Math.min(Math.floor(config.runnerHealthIntervalMs / 3), 10_000)))
    : null;
  localRunner?.start();
  const scheduler = new Scheduler(ctx, producers, engine);
  scheduler.start();
  await engine.kickOutbox(); // what was committed before a crash but not yet published
  engine.kickJobs();

  logger.info({ url: listenUrl, base_url: urls.base, bus: bus.kind }, `listening on ${listenUrl}`);

  let stopping: Promise<void> | null = null;
  return {
    url: listenUrl,
    ctx,
    bus,
    stop: () =>
      (stopping ??= (async () => {
        scheduler.stop();
        localRunner?.stop();
        await new Promise<void>((r) => server.close(() => r()));
        ingestSub.unsubscribe();
        controlSub.unsubscribe();
        // Publish what is committed, and let the bus hand it to dispatch, before the event consumer
        // goes: an event published after it went would be marked published yet never delivered
        // (in memory mode nothing would ever deliver it again, not even after a restart).
        await engine.close();
        await bus.close().catch(() => {});
        eventSub.unsubscribe();
        await deliverer.close(config.deliveryTimeoutMs);
        db.close();
      })()),
  };
}
