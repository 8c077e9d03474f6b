import { type Command, InvalidArgumentError, Option } from 'commander';
import {
  DEFAULT_DELIVERY_CONCURRENCY,
  parseBool,
  parseCount,
  parseDuration,
  parsePort,
  parsePositiveInt,
  parseReplicas,
  parseUrl,
  type ServeConfig,
  DEFAULT_EVENT_RETENTION_MS,
  DEFAULT_AUDIT_RETENTION_MS,
  DEFAULT_API_QUEUE_PER_ORG,
  DEFAULT_INGEST_RATE_PER_ORG,
  DEFAULT_MAX_EVENTS_PER_ORG,
} from '../config.ts';
import { LIMITS } from '../domain/limits.ts';
import { sleep, systemClock } from '../domain/clock.ts';
import type { RelayFault } from '../handoff/outbox-relay.ts';
import { UsageError } from './exit-errors.ts';
import { lockStore, type StoreLock } from '../../store/lock.ts';
import type { RunningServer } from '../server.ts';
import net from 'node:net';
import { PortInUseError, StartAbortedError } from '../start-errors.ts';
import { collectEagerly } from './heap.ts';
import { parseNatsUrls } from '../bus/nats/nats-url.ts';

export const arg =
  <T>(fn: (s: string) => T) =>
  (value: string): T => {
    try {
      return fn(value);
    } catch (err) {
      throw new InvalidArgumentError(err instanceof Error ? err.message : String(err));
    }
  };

/** CONTRACT 4.5: a duration, or 0 to keep no history. */
const eventRetention = (s: string): number => (s.trim() === '0' ? 0 : parseDuration(s));

const driftInterval = (s: string): number | null => (s.trim().toLowerCase() === 'off' ? null : parseDuration(s));

interface ServeOptions {
  port: number;
  host: string;
  db: string;
  nats?: string;
  natsReplicas?: number;
  baseUrl?: string;
  dashboardUrl?: string;
  localRunner: boolean;
  runnerHealthInterval: number;
  deliveryTimeout: number;
  allowPrivateTargets?: boolean;
  driftInterval: number | null;
  deliveryConcurrency: number;
  deliver: boolean;
  natsCreds?: string;
  deliveryThreads?: number;
  maxWebhooksPerOrg: number;
  eventRetention: number;
  auditRetention: number;
  trustProxy?: boolean;
  apiQueuePerOrg: number;
  ingestRatePerOrg: number;
  maxEventsPerOrg: number;
}

const SERVE_HELP = `
One svc serve per database: the process holds a lock on <db>.lock while it runs; a second
svc serve on the same database (any port, any bus, any path to the file) exits 1 naming the
holder. A database file with hard links is refused. The lock goes with the process (kill -9
included). svc orgs create, svc tokens create and svc dataplane-key work beside it.
A port taken by another process: exit 1 at once, "error: port <p> is in use".`;

export function registerServeCommand(program: Command): void {
  const serve = program.command('serve').description('run the engine: HTTP API, dashboard, bus, dispatch and delivery');
  addListenOptions(serve);
  addEngineOptions(serve);
  addLimitOptions(serve);
  serve.addHelpText('after', SERVE_HELP).action(runServe);
}

/**
 * An option that may come from an environment variable, parsed (a usage error when it does not
 * parse), with its default (and the default as help shows it) when there is one.
 */
function envOption<T>(flags: string, description: string, env: string, parse: (s: string) => T, byDefault?: T, shown?: string): Option {
  const option = new Option(flags, description).env(env).argParser(arg(parse));
  return byDefault === undefined ? option : option.default(byDefault, shown);
}

/** Where svc serve listens and what it connects to: HTTP, the database, NATS, its public URLs. */
function addListenOptions(serve: Command): void {
  serve
    .addOption(envOption('--port <port>', 'HTTP port (0 picks a free one)', 'SVC_PORT', parsePort, 8080))
    .addOption(new Option('--host <host>', 'HTTP host').env('SVC_HOST').default('127.0.0.1'))
    .addOption(new Option('--db <path>', 'SQLite database file').env('SVC_DB').default('./data/svc.db'))
    .addOption(natsUrlOption('NATS server URL, or a comma-separated seed list of a cluster (unset: in-process bus)'))
    .addOption(
      envOption(
        '--nats-replicas <n>',
        'replicas of every JetStream stream and KV bucket svc uses (default: 3 on a JetStream cluster of 3 or more, else 1)',
        'SVC_NATS_REPLICAS',
        parseReplicas,
      ),
    )
    .addOption(envOption('--base-url <url>', 'public base URL (default http://<host>:<port>)', 'SVC_BASE_URL', parseUrl))
    .addOption(
      envOption('--dashboard-url <url>', 'dashboard URL used in event links (default <base-url>/dashboard)', 'SVC_DASHBOARD_URL', parseUrl),
    );
}

/** What the engine runs in this process: runners, delivery, drift scans. */
function addEngineOptions(serve: Command): void {
  serve
    .addOption(new Option('--no-local-runner', 'do not run jobs in process; wait for external runners'))
    .addOption(
      envOption(
        '--runner-health-interval <duration>',
        'runner health check interval',
        'SVC_RUNNER_HEALTH_INTERVAL',
        parseDuration,
        15 * 60_000,
        '15m',
      ),
    )
    .addOption(deliveryTimeoutOption())
    .addOption(allowPrivateTargetsOption())
    .addOption(
      envOption('--drift-interval <duration|off>', 'scheduled drift scans', 'SVC_DRIFT_INTERVAL', driftInterval, 24 * 3_600_000, '24h'),
    )
    .addOption(deliveryConcurrencyOption())
    .addOption(new Option('--no-deliver', 'NATS mode: run the engine and the API only; svc worker processes deliver'))
    .addOption(natsCredsOption())
    .addOption(
      envOption(
        '--delivery-threads <n>',
        'delivery threads (NATS mode: default one per spare core; embedded mode: one; 0 = on the engine thread)',
        'SVC_DELIVERY_THREADS',
        parseCount,
      ),
    );
}

/** What one org may use, and how long records are kept. */
function addLimitOptions(serve: Command): void {
  serve
    .addOption(
      envOption(
        '--max-webhooks-per-org <n>',
        'webhooks one org may have (more: 409 limit_exceeded)',
        'SVC_MAX_WEBHOOKS_PER_ORG',
        parsePositiveInt,
        LIMITS.webhooksPerOrg,
      ),
    )
    .addOption(
      envOption(
        '--api-queue-per-org <n>',
        "an org's HTTP requests waiting for their turn at most (more: 429 rate_limited; 0: no bound)",
        'SVC_API_QUEUE_PER_ORG',
        parseCount,
        DEFAULT_API_QUEUE_PER_ORG,
      ),
    )
    .addOption(ingestRateOption())
    .addOption(
      envOption(
        '--max-events-per-org <n>',
        "events kept per org; past it the org's oldest are pruned (0: no limit)",
        'SVC_MAX_EVENTS_PER_ORG',
        parseCount,
        DEFAULT_MAX_EVENTS_PER_ORG,
      ),
    )
    .addOption(
      new Option('--trust-proxy', 'take the dashboard sign-in client address from X-Forwarded-For (only behind a proxy that sets it)'),
    )
    .addOption(
      envOption(
        '--audit-retention <duration>',
        'how long the audit log is kept',
        'SVC_AUDIT_RETENTION',
        parseDuration,
        DEFAULT_AUDIT_RETENTION_MS,
        '90d',
      ),
    )
    .addOption(
      envOption(
        '--event-retention <duration|0>',
        'how long emitted events and delivery attempts are kept (0: none)',
        'SVC_EVENT_RETENTION',
        eventRetention,
        DEFAULT_EVENT_RETENTION_MS,
        '7d',
      ),
    );
}

/** The serve action: signal handlers first, then the port check, the database lock and the start. */
async function runServe(opts: ServeOptions, cmd: Command): Promise<void> {
  collectEagerly();
  const config = toConfig(opts, cmd);
  // The handlers go in before anything starts: a SIGTERM at any moment of the start (a NATS
  // connect, a wait for readiness) abandons it, stops what it had started and exits 0; one that
  // comes once `listening on` is printed drains and exits 0. Neither kills the process midway.
  const abort = new AbortController();
  let started: Promise<RunningServer> | null = null;
  let lock: StoreLock | null = null;
  let exiting = false;
  const shutdown = async (signal: string) => {
    if (exiting) return;
    exiting = true;
    systemClock.setTimeout(() => process.exit(1), config.deliveryTimeoutMs + 15_000); // a drain that hangs
    abort.abort();
    const outcome = started
      ? await started.then(
          (running) => ({ running }),
          (err: unknown) => ({ err }),
        )
      : { running: null };
    if ('err' in outcome && !(outcome.err instanceof StartAbortedError)) return; // start-up failed: the action reports it (exit 1)
    const running = 'running' in outcome ? outcome.running : null;
    if (running) {
      running.ctx.logger.info({ signal }, 'shutting down');
      await running.stop();
    }
    lock?.release();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  // A taken port is refused at once (CONTRACT 8), before the start's work: bound for a moment
  // and let go. Taken between this and the server's own listen, the start fails there as well.
  await refuseTakenPort(config.port, config.host);
  // One `svc serve` per database (CONTRACT 1): refused here, before anything opens the store
  lock = lockStore(config.db);
  started = import('../server.ts').then(({ startServer }) =>
    startServer(config, { relayFault: relayFaultFromEnv(), signal: abort.signal }),
  );
  try {
    await started;
  } catch (err) {
    if (err instanceof StartAbortedError) return; // SIGTERM: shutdown exits, 0
    // startServer stopped what it had started (the database is closed); the lock goes too, and
    // main reports the error (exit 1). Should anything still hold the process, it ends anyway.
    lock.release();
    setTimeout(() => process.exit(1), 500).unref();
    throw err;
  }
}

/** Throw PortInUseError when another process listens on host:port (port 0 picks a free one: nothing to check). */
function refuseTakenPort(port: number, host: string): Promise<void> {
  if (port === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err: NodeJS.ErrnoException) =>
      err.code === 'EADDRINUSE' ? reject(new PortInUseError(port, { cause: err })) : resolve(),
    );
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

function toConfig(opts: ServeOptions, cmd: Command): ServeConfig {
  let localRunner = opts.localRunner;
  if (cmd.getOptionValueSource('localRunner') === 'default' && process.env.SVC_LOCAL_RUNNER !== undefined) {
    const v = process.env.SVC_LOCAL_RUNNER.trim().toLowerCase();
    if (!['on', 'off', '1', '0', 'true', 'false'].includes(v))
      throw new UsageError(`SVC_LOCAL_RUNNER must be on or off, not ${JSON.stringify(v)}`);
    localRunner = v === 'on' || v === '1' || v === 'true';
  }
  const allowPrivate = allowPrivateTargets(opts.allowPrivateTargets);
  let deliver = opts.deliver;
  if (cmd.getOptionValueSource('deliver') === 'default' && process.env.SVC_DELIVER !== undefined) {
    try {
      deliver = parseBool(process.env.SVC_DELIVER);
    } catch (err) {
      throw new UsageError(`SVC_DELIVER must be on or off: ${(err as Error).message}`);
    }
  }
  if (opts.natsReplicas !== undefined && !opts.nats)
    throw new UsageError('--nats-replicas needs --nats: the in-process bus keeps no replicas');
  if (!deliver && !opts.nats)
    throw new UsageError('--no-deliver needs --nats: in embedded mode this process is the only one that can deliver');
  return {
    port: opts.port,
    host: opts.host,
    db: opts.db,
    natsUrl: opts.nats ?? null,
    natsReplicas: opts.natsReplicas ?? null,
    baseUrl: opts.baseUrl ?? null,
    dashboardUrl: opts.dashboardUrl ?? null,
    localRunner,
    runnerHealthIntervalMs: opts.runnerHealthInterval,
    deliveryTimeoutMs: opts.deliveryTimeout,
    allowPrivateTargets: allowPrivate,
    driftIntervalMs: opts.driftInterval,
    deliveryConcurrency: opts.deliveryConcurrency,
    deliver,
    natsCreds: opts.natsCreds ?? null,
    deliveryThreads: opts.deliveryThreads ?? null,
    maxWebhooksPerOrg: opts.maxWebhooksPerOrg,
    eventRetentionMs: opts.eventRetention,
    auditRetentionMs: opts.auditRetention,
    trustProxy: envFlag(opts.trustProxy, 'SVC_TRUST_PROXY'),
    apiQueuePerOrg: opts.apiQueuePerOrg,
    ingestRatePerOrg: opts.ingestRatePerOrg,
    maxEventsPerOrg: opts.maxEventsPerOrg,
  };
}

export const deliveryTimeoutOption = () =>
  envOption('--delivery-timeout <duration>', 'webhook response wait', 'SVC_DELIVERY_TIMEOUT', parseDuration, 5000, '5s');

export const allowPrivateTargetsOption = () =>
  new Option('--allow-private-targets', 'allow webhook targets on loopback and private addresses');

export const deliveryConcurrencyOption = () =>
  envOption(
    '--delivery-concurrency <n>',
    'delivery attempts in flight at most, all webhooks together (8 per webhook)',
    'SVC_DELIVERY_CONCURRENCY',
    parsePositiveInt,
    DEFAULT_DELIVERY_CONCURRENCY,
  );

/** --nats (SVC_NATS_URL): one URL or a comma-separated seed list (CONTRACT 1). */
export const natsUrlOption = (description: string) =>
  new Option('--nats <urls>', description).env('SVC_NATS_URL').argParser(arg(parseNatsUrls));

export const natsCredsOption = () => new Option('--nats-creds <file>', 'NATS credentials file (svc nats init)').env('SVC_NATS_CREDS');

/** A flag, or its environment variable as a boolean (SVC_TRUST_PROXY=1; =0 is off). */
function envFlag(flag: boolean | undefined, name: string): boolean {
  if (flag) return true;
  const v = process.env[name];
  if (v === undefined) return false;
  try {
    return parseBool(v);
  } catch (err) {
    throw new UsageError(`${name}: ${(err as Error).message}`);
  }
}

/** --allow-private-targets, or SVC_ALLOW_PRIVATE_TARGETS=1. */
export function allowPrivateTargets(flag: boolean | undefined): boolean {
  return envFlag(flag, 'SVC_ALLOW_PRIVATE_TARGETS');
}

/**
 * FAULT INJECTION, for test/system/crash.test.ts only (src/handoff/outbox-relay.ts RelayFault):
 * SVC_FAULT_CRASH_BEFORE_PUBLISH=1 kills the process (SIGKILL) at the first batch of committed
 * events, before publishing any of them; SVC_FAULT_CRASH_AFTER_PUBLISH=1 once JetStream has stored
 * the first batch, before its rows are deleted. Each waits 100 ms first so that the answers to
 * producers whose facts are already committed ({ok: true}) reach them. Unset: none.
 */
function relayFaultFromEnv(): RelayFault | undefined {
  const points = (['before-publish', 'after-publish'] as const).filter(
    (p) => process.env[`SVC_FAULT_CRASH_${p === 'before-publish' ? 'BEFORE' : 'AFTER'}_PUBLISH`] === '1',
  );
  if (!points.length) return undefined;
  return async (point) => {
    if (!points.includes(point)) return;
    await sleep(systemClock, 100);
    process.kill(process.pid, 'SIGKILL');
    await new Promise(() => {}); // never resumes
  };
}

/** --ingest-rate-per-org (CONTRACT 8, 9): svc serve's and svc worker's gates each hold it per org. */
export function ingestRateOption(): Option {
  return envOption(
    '--ingest-rate-per-org <n>',
    'producer facts per second per org, in bursts of up to 4 times as many (more: rate_limited; 0: no limit)',
    'SVC_INGEST_RATE_PER_ORG',
    parseCount,
    DEFAULT_INGEST_RATE_PER_ORG,
  );
}
