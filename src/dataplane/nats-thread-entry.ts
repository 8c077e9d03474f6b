// Entry of a delivery thread of svc serve (see threads.ts): one NATS data plane.
import { parentPort, workerData } from 'node:worker_threads';
import pino from 'pino';
import { systemClock } from '../domain/clock.ts';
import { connectNats } from '../bus/nats.ts';
import { Seal, parseDataplaneKey } from '../bus/seal.ts';
import { startNatsDataPlane } from './data-plane.ts';
import type { FromThread, ThreadConfig, ToThread } from './threads.ts';

const config = workerData as ThreadConfig;
const logger = pino({ base: { thread: config.workerId }, level: config.logLevel, timestamp: pino.stdTimeFunctions.isoTime });
const post = (m: FromThread) => parentPort!.postMessage(m);

async function main(): Promise<void> {
  const nc = await connectNats(config.natsUrl, {
    name: `svc-delivery-${config.workerId}`,
    logger,
    waitForServer: true,
    role: 'worker',
    credsFile: config.credsFile,
  });
  const plane = await startNatsDataPlane({ nc, seal: new Seal(parseDataplaneKey(config.key)), limits: config.limits, workerId: config.workerId, clock: systemClock, logger });
  parentPort!.on('message', (m: ToThread) => {
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
