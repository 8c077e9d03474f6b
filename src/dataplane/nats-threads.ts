// svc serve's data plane off the engine's event loop, NATS mode: N worker threads, each a NATS data
// plane (src/dataplane/nats-thread-entry.ts) with its own connection, sharing the durable consumer
// with each other and with any svc worker process. Each is kept running by a SupervisedThread
// (thread-supervisor.ts): one that dies is started again. Their outcome batches come back through
// the thread's port, not the bus: the engine is in this process (a svc worker's go on SVC_OUTCOMES).
import type { Logger } from 'pino';
import { decodeOutcomeBatch, type OutcomeBatch } from '../outcomes/outcome.ts';
import type { DeliveryLimits } from './data-plane.ts';
import { entryBeside, SupervisedThread, type ThreadLifecycle } from './thread-supervisor.ts';

export interface NatsThreadConfig {
  natsUrl: string;
  credsFile: string | null;
  /** base64 data plane key */
  key: string;
  limits: DeliveryLimits;
  workerId: string;
  logLevel: string;
}

export type ToNatsThread = { type: 'drain' };
export type FromNatsThread = ThreadLifecycle | { type: 'outcomes'; batch: string };

export class NatsDeliveryThreads {
  private readonly threads: Array<SupervisedThread<ToNatsThread, FromNatsThread>>;

  constructor(
    count: number,
    config: Omit<NatsThreadConfig, 'workerId'> & { workerIdPrefix: string },
    logger: Logger,
    /** the engine's status book */
    outcomes: (batch: OutcomeBatch) => void,
  ) {
    const { workerIdPrefix, ...rest } = config;
    this.threads = Array.from(
      { length: count },
      (_, i) =>
        new SupervisedThread<ToNatsThread, FromNatsThread>({
          entry: entryBeside(import.meta.url, 'nats-thread-entry'),
          workerData: { ...rest, workerId: `${workerIdPrefix}_t${i}` } satisfies NatsThreadConfig,
          name: 'delivery thread',
          logFields: { thread: i },
          logger,
          onMessage: (m) => {
            const batch = m.type === 'outcomes' ? decodeOutcomeBatch(m.batch) : null;
            if (batch) outcomes(batch);
          },
        }),
    );
  }

  /** Start every thread; resolves when each has loaded the registry and started pulling. */
  async start(): Promise<void> {
    await Promise.all(this.threads.map((t) => t.start()));
  }

  /** Drain every thread (CONTRACT 6.6) and wait for them to exit. */
  async drain(): Promise<void> {
    await Promise.all(this.threads.map((t) => t.drain()));
  }
}
