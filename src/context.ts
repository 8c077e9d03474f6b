import type { Logger } from 'pino';
import type { Db } from '../store/db.ts';
import type { ServeConfig } from './config.ts';
import type { Metrics } from './metrics.ts';
import type { Deliverer } from './delivery/client.ts';
import type { Engine } from './engine/engine.ts';
import type { Orchestrator } from './orchestrator/runtime.ts';
import type { Clock } from './domain/clock.ts';

/** What services need at run time. Built once by src/server.ts. */
export interface AppContext {
  db: Db;
  clock: Clock;
  config: ServeConfig;
  logger: Logger;
  metrics: Metrics;
  deliverer: Deliverer;
  engine: Engine;
  orchestrator: Orchestrator;
  /** set once the HTTP server is bound */
  urls: { base: string; dashboard: string; source: string };
  /** tells dispatch that a webhook was created, changed or deleted */
  webhookChanged(orgId: string, webhookId: string): void;
  /** tells dispatch that labels of an install (or its components/actions) changed */
  labelsChanged(installId: string): void;
}
