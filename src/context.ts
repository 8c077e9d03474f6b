import type { Context as HonoContext, Env, MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import type { Db } from '../store/db.ts';
import type { DeliveryStatus } from '../store/delivery-status.ts';
import type { WebhookRow } from '../store/webhooks.ts';
import type { ServeConfig } from './config.ts';
import type { Metrics } from './metrics.ts';
import type { AttemptResult } from './delivery/client.ts';
import type { Engine } from './engine/engine.ts';
import type { Clock } from './domain/clock.ts';
import type { Readiness } from './readiness.ts';

/**
 * The admission of the orgs' HTTP requests as the API installs it (src/http/fair-admission.ts
 * FairAdmission): declared here, so that the context imports nothing from the HTTP layer above it.
 */
export interface RequestAdmission {
  /** the admission as middleware, after authentication: `orgOf` names the request's org */
  middleware<E extends Env>(orgOf: (c: HonoContext<E>) => string | undefined): MiddlewareHandler<E>;
}

/** What services need at run time. Built once by src/server.ts. */
export interface AppContext {
  db: Db;
  clock: Clock;
  config: ServeConfig;
  logger: Logger;
  metrics: Metrics;
  engine: Engine;
  /** set once the HTTP server is bound */
  urls: { base: string; dashboard: string; source: string };
  /** whether this process should get traffic (GET /readyz) */
  readiness: Readiness;
  /** HTTP requests of the orgs, admitted round robin into a bounded number of seats (CONTRACT 8) */
  admission: RequestAdmission;
  /** replicates a created, changed or deleted webhook to the data plane */
  webhookChanged(orgId: string, webhookId: string): void;
  /** the webhook registry version of the newest change (what work queued now must be matched against) */
  registryRevision(): number;
  /** delivery status per webhook, fed by delivery outcomes */
  deliveryStatus: {
    get(webhookId: string): DeliveryStatus;
    list(orgId: string): Map<string, DeliveryStatus>;
    /** write what the outcomes received lately changed (statuses, the attempt log) */
    flush(): void;
  };
  /**
   * One signed attempt of an event at this webhook alone, counted in its delivery status and the
   * attempt log (the ping; a resend, with `recovery` = 'resend' sent as X-Svc-Recovery).
   */
  attemptNow(webhook: WebhookRow, eventId: string, type: string, body: Buffer, recovery?: string): Promise<AttemptResult>;
}
