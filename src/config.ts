// `svc serve` configuration: CONTRACT 1 options, each also an environment variable.
import { durationMs } from './domain/duration.ts';

export interface ServeConfig {
  port: number;
  host: string;
  db: string;
  /** one NATS URL or a comma-separated seed list (CONTRACT 1); null = the in-process bus */
  natsUrl: string | null;
  /** replicas of every stream and KV bucket svc uses (CONTRACT 1); null = 3 on a JetStream cluster of 3 or more, else 1 */
  natsReplicas?: number | null;
  /** as given; null = http://<host>:<bound port> */
  baseUrl: string | null;
  /** as given; null = <base-url>/dashboard */
  dashboardUrl: string | null;
  localRunner: boolean;
  runnerHealthIntervalMs: number;
  deliveryTimeoutMs: number;
  allowPrivateTargets: boolean;
  /** null = scheduled drift scans off */
  driftIntervalMs: number | null;
  /** attempts in flight at most per process, all webhooks together (CONTRACT 6.6) */
  deliveryConcurrency: number;
  /** false (--no-deliver, NATS mode only): svc worker processes deliver */
  deliver: boolean;
  /** a NATS .creds file (CONTRACT 6.7) */
  natsCreds: string | null;
  /** delivery threads: NATS mode null = one per spare core, at least one; embedded mode one whatever n; 0 = on the engine's thread */
  deliveryThreads: number | null;
  /** webhooks one org may have (CONTRACT 8); creating one more is 409 limit_exceeded */
  maxWebhooksPerOrg: number;
  /** how long emitted events and attempts are kept (CONTRACT 4.5 --event-retention); 0 = none; undefined = the default */
  eventRetentionMs?: number;
  /** how long the audit log is kept (CONTRACT 2 --audit-retention); undefined = the default */
  auditRetentionMs?: number;
  /**
   * --trust-proxy (SVC_TRUST_PROXY): the dashboard sign-in back-off takes the client address from
   * X-Forwarded-For (CONTRACT 8); otherwise from the connection. undefined = false.
   */
  trustProxy?: boolean;
  /** an org's HTTP requests waiting for a seat at most; one more is 429 rate_limited (CONTRACT 8); 0 = no bound; undefined = the default */
  apiQueuePerOrg?: number;
  /** producer facts per second per org, bursts of four times as many (CONTRACT 8, 9); 0 = no limit; undefined = the default */
  ingestRatePerOrg?: number;
  /** events kept per org: past it the org's oldest are pruned (CONTRACT 8); 0 = no quota; undefined = the default */
  maxEventsPerOrg?: number;
}

/** Default --event-retention (CONTRACT 4.5): 7 days. */
export const DEFAULT_EVENT_RETENTION_MS = 7 * 86_400_000;

/** Default --audit-retention (CONTRACT 2): 90 days. */
export const DEFAULT_AUDIT_RETENTION_MS = 90 * 86_400_000;

/** Defaults of the per-org shares (CONTRACT 8): --api-queue-per-org, --ingest-rate-per-org (facts/s), --max-events-per-org. */
export const DEFAULT_API_QUEUE_PER_ORG = 200;
export const DEFAULT_INGEST_RATE_PER_ORG = 5000;
export const DEFAULT_MAX_EVENTS_PER_ORG = 2_000_000;

/** Default --delivery-concurrency (CONTRACT 1). */
export const DEFAULT_DELIVERY_CONCURRENCY = 256;

export function parsePositiveInt(text: string): number {
  if (!/^\d+$/.test(text.trim()) || Number(text) < 1)
    throw new Error(`invalid number ${JSON.stringify(text)} (a whole number, at least 1)`);
  return Number(text);
}

export function parseCount(text: string): number {
  if (!/^\d+$/.test(text.trim())) throw new Error(`invalid number ${JSON.stringify(text)} (a whole number)`);
  return Number(text);
}

/** --nats-replicas: JetStream keeps 1 to 5 replicas of a stream. */
export function parseReplicas(text: string): number {
  const n = parsePositiveInt(text);
  if (n > 5) throw new Error(`invalid replica count ${n} (JetStream keeps 1 to 5)`);
  return n;
}

/** '500ms', '2s', '15m', '24h' → milliseconds (more than 0). Throws on anything else. */
export function parseDuration(text: string): number {
  const ms = durationMs(text);
  if (ms === null) throw new Error(`invalid duration ${JSON.stringify(text)} (use e.g. 500ms, 2s, 15m, 24h)`);
  if (!(ms > 0)) throw new Error(`duration ${JSON.stringify(text)} must be positive`);
  return ms;
}

export function parsePort(text: string): number {
  if (!/^\d+$/.test(text.trim())) throw new Error(`invalid port ${JSON.stringify(text)}`);
  const n = Number(text);
  if (n < 0 || n > 65535) throw new Error(`port ${n} out of range 0-65535`);
  return n;
}

export function parseUrl(text: string): string {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new Error(`invalid URL ${JSON.stringify(text)}`);
  }
  if (!['http:', 'https:', 'nats:', 'tls:'].includes(u.protocol) || !u.host) throw new Error(`invalid URL ${JSON.stringify(text)}`);
  return text.replace(/\/+$/, '');
}

export function parseBool(text: string): boolean {
  const t = text.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(t)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(t)) return false;
  throw new Error(`invalid boolean ${JSON.stringify(text)}`);
}

export function effectiveBaseUrl(cfg: ServeConfig, boundPort: number): string {
  return cfg.baseUrl ?? `http://${hostForUrl(cfg.host)}:${boundPort}`;
}

export function effectiveDashboardUrl(cfg: ServeConfig, baseUrl: string): string {
  return (cfg.dashboardUrl ?? `${baseUrl}/dashboard`).replace(/\/+$/, '');
}

export function hostForUrl(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}
