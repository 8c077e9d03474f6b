// Entry of a delivery thread of svc serve in NATS mode (see nats-threads.ts): one NATS data plane.
import { parentPort, workerData } from 'node:worker_threads';
import pino from 'pino';
import { systemClock } from '../domain/clock.ts';
import { connectNats } from '../bus/nats/nats-connection.ts';
import { Seal, parseDataplaneKey } from '../bus/seal.ts';
import { startNatsDataPlane } from './data-plane.ts';
import { encodeOutcomeBatch, type OutcomeBatch } from '../outcomes/outcome.ts';
import type { FromNatsThread, NatsThreadConfig, ToNatsThread } from './nats-threads.ts';

const config = workerData as NatsThreadConfig;
const logger = pino({ base: { thread: config.workerId }, level: config.logLevel, timestamp: pino.stdTimeFunctions.isoTime });
const post = (m: FromNatsThread) => parentPort!.postMessage(m);

async function main(): Promise<void> {
  const nc = await connectNats(config.natsUrl, {
    name: `svc-delivery-${config.workerId}`,
    logger,
    waitForServer: true,
    role: 'worker',
    credsFile: config.credsFile,
  });
  // outcome batches go to the engine through this thread's port (posted in order, before `drained`)
  const outcomes = (batch: OutcomeBatch) => post({ type: 'outcomes', batch: encodeOutcomeBatch(batch) });
  const plane = await startNatsDataPlane({
    nc,
    seal: new Seal(parseDataplaneKey(config.key)),
    limits: config.limits,
    workerId: config.workerId,
    clock: systemClock,
    logger,
    outcomes,
  });
  parentPort!.on('message', (m: ToNatsThread) => {
    if (m.type !== 'drain') return;
    void (async () => {
      await plane.drain();
      await nc.drain().catch(() => nc.close());
      post({ type: 'drained' });
      process.exit(0);
    })();
  });
  post({ type: 'ready' });
}

main().catch((err: unknown) => {
  post({ type: 'failed', error: err instanceof Error ? err.message : String(err) });
  process.exit(1);
});
