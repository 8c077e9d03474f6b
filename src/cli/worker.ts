// `svc worker` (CONTRACT 1): a delivery worker. No database, no HTTP API: it consumes events from
// JetStream and delivers them, sharing the work with every other worker and svc serve's threads;
// one that dies loses nothing. It needs the data plane key: from its credentials file (svc nats
// init writes it into worker.creds) or SVC_DATAPLANE_KEY (printed by `svc dataplane-key`).
import { randomUUID } from 'node:crypto';
import type { Command } from 'commander';
import pino from 'pino';
import { systemClock } from '../domain/clock.ts';
import { connectNats, redactNatsUrl } from '../bus/nats/nats-connection.ts';
import { DataplaneKeyMissingError, resolveDataplaneKey } from '../bus/nats/dataplane-key.ts';
import { Seal } from '../bus/seal.ts';
import { startNatsDataPlane } from '../dataplane/data-plane.ts';
import { UsageError } from './exit-errors.ts';
import { Readiness, trackNatsConnection } from '../readiness.ts';
import {
  allowPrivateTargets,
  allowPrivateTargetsOption,
  deliveryConcurrencyOption,
  deliveryTimeoutOption,
  ingestRateOption,
  natsCredsOption,
  natsUrlOption,
} from './serve.ts';
import { INBOX_PREFIX } from '../bus/subjects.ts';
import { startOrgDirectory } from '../bus/nats/org-directory.ts';
import { startGate } from '../ingest/gate.ts';
import { createMetrics } from '../metrics.ts';
import { collectEagerly } from './heap.ts';

interface WorkerOptions {
  nats?: string;
  natsCreds?: string;
  deliveryConcurrency: number;
  deliveryTimeout: number;
  allowPrivateTargets?: boolean;
  ingestRatePerOrg: number;
}

export function registerWorkerCommand(program: Command): void {
  program
    .command('worker')
    .description('a delivery worker: consumes events from JetStream and delivers them (no database, no HTTP API)')
    .addOption(natsUrlOption('NATS server URL, or a comma-separated seed list of a cluster'))
    .addOption(natsCredsOption())
    .addOption(deliveryConcurrencyOption())
    .addOption(deliveryTimeoutOption())
    .addOption(allowPrivateTargetsOption())
    .addOption(ingestRateOption())
    .action(async (opts: WorkerOptions) => {
      collectEagerly();
      if (!opts.nats) throw new UsageError('svc worker needs --nats <urls> (or SVC_NATS_URL)');
      const key = workerKey(opts.natsCreds ?? null);
      const logger = pino({ base: undefined, timestamp: pino.stdTimeFunctions.isoTime });
      const workerId = `worker_${randomUUID().slice(0, 8)}`;
      if (!opts.natsCreds)
        logger.warn(
          { url: redactNatsUrl(opts.nats) },
          'no --nats-creds: anyone who can reach this NATS server can act as any org (see svc nats init)',
        );
      // `worker ready` is a promise (CONTRACT 1): printed once the consumer is attached and its
      // first pull request is confirmed by the server (this process has no HTTP server, no /readyz)
      const readiness = new Readiness({ consumers: 'the event consumer is not attached yet' });
      const nc = await connectNats(opts.nats, {
        name: `svc-${workerId}`,
        logger,
        waitForServer: true,
        role: 'worker',
        credsFile: opts.natsCreds ?? null,
      });
      trackNatsConnection(nc, readiness);
      const plane = await startNatsDataPlane({
        nc,
        seal: new Seal(key),
        limits: {
          concurrency: opts.deliveryConcurrency,
          timeoutMs: opts.deliveryTimeout,
          allowPrivateTargets: allowPrivateTargets(opts.allowPrivateTargets),
        },
        workerId,
        clock: systemClock,
        logger,
      });
      // this process's ingest gate (CONTRACT 9): producers are answered while no engine runs
      const orgs = startOrgDirectory(nc, { logger });
      const gate = startGate({
        nc,
        logger,
        metrics: createMetrics(),
        clock: systemClock,
        gateId: workerId,
        inboxPrefix: INBOX_PREFIX.worker,
        orgs,
        ratePerOrg: opts.ingestRatePerOrg,
      });
      await nc.flush(); // the gate's subscriptions are the server's
      readiness.ready('consumers');
      await readiness.whenReady();
      // the handlers go in before `worker ready` is printed: a SIGTERM as soon as it is seen drains
      // and exits 0 (it killed the process when it came before them)
      let exiting = false;
      const shutdown = async (signal: string) => {
        if (exiting) return;
        exiting = true;
        readiness.stopping();
        logger.info({ signal }, 'draining');
        systemClock.setTimeout(() => process.exit(1), opts.deliveryTimeout + 15_000); // a drain that hangs
        const t0 = systemClock.now();
        await gate.drain(); // later requests go to another process; those received are stored and answered
        orgs.stop();
        await plane.drain();
        await nc.drain().catch(() => nc.close());
        // the final line (issue 56): deliveries in flight finished, nothing left unacknowledged
        logger.info({ signal, ms: systemClock.now() - t0 }, 'drained');
        logger.flush();
        process.exit(0);
      };
      process.on('SIGTERM', () => void shutdown('SIGTERM'));
      process.on('SIGINT', () => void shutdown('SIGINT'));
      // the guard's setting is the worker's own (svc serve's pings and resends follow svc serve's):
      // said here so that a worker and an engine that disagree can be told apart
      logger.info(
        { worker: workerId, concurrency: opts.deliveryConcurrency, allow_private_targets: allowPrivateTargets(opts.allowPrivateTargets) },
        'worker ready',
      );
    });
}

/** The data plane key (src/bus/nats/dataplane-key.ts) without a database: a usage error when it is missing or unreadable. */
function workerKey(natsCreds: string | null): Buffer {
  try {
    return resolveDataplaneKey(null, natsCreds);
  } catch (err) {
    if (err instanceof DataplaneKeyMissingError) {
      throw new UsageError(
        'svc worker needs the data plane key: --nats-creds with the worker.creds of `svc nats init`, ' +
          'or SVC_DATAPLANE_KEY (`svc dataplane-key --db <engine database>` prints it)',
      );
    }
    throw new UsageError(`the data plane key: ${(err as Error).message}`);
  }
}
