// Durable ingest through kill -9 of the engine (CONTRACT 9, issue 51) on a 3-server NATS cluster,
// every stream on 3 replicas (--nats-replicas 3): the ledger of test/helpers/ingest-ledger.ts (a
// fact every 20 ms for 30 s, svc serve killed at 5 s and started again at 15 s, a svc worker beside
// it; every fact answered ok within the p99 bound and applied once, each event delivered once). In
// the serial set (vitest.config.ts): three nats-servers and two svc processes for a minute.
import { describe, it } from 'vitest';
import { findNatsServer } from '../helpers/nats-server.ts';
import { startNatsCluster } from '../helpers/nats-cluster.ts';
import { expectIngestLedger, runIngestLedger } from '../helpers/ingest-ledger.ts';

describe.skipIf(findNatsServer() === null)('durable ingest, NATS mode, a 3-server cluster with 3 replicas', () => {
  it('kill -9 of svc serve at 5 s, started again at 15 s, a worker beside it: every fact answered ok and applied once', async (ctx) => {
    const cluster = await startNatsCluster();
    ctx.onTestFinished(() => cluster.stop());
    expectIngestLedger(await runIngestLedger(ctx, { name: 'cluster of 3', natsUrl: cluster.urls, serveArgs: ['--nats-replicas', '3'] }));
  }, 90_000);
});
