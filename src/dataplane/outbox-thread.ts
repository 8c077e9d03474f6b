// Embedded mode's delivery thread, seen from the engine's thread: the thread (outbox-thread-entry.ts:
// the outbox source, the pipeline, the deliverer and the outcome batches, over a SQLite connection
// of its own to the same file) is kept running by a SupervisedThread (thread-supervisor.ts); this
// feeds it the webhook registry, tells it that rows were committed, takes its outcome batches back
// and asks it whether it is idle.
//
// The engine's thread sends only a kick per commit, never the rows: the thread reads them from the
// outbox itself, so a commit costs the engine one postMessage whatever the fan-out.
import type { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { OutcomeBatch } from '../outcomes/outcome.ts';
import type { DeliveryLimits, RegistryChange } from './data-plane.ts';
import { entryBeside, SupervisedThread, type ThreadLifecycle } from './thread-supervisor.ts';

export interface OutboxThreadConfig {
  /** the database file (its own connection: WAL, busy_timeout, store/db.ts) */
  db: string;
  limits: DeliveryLimits;
  logLevel: string;
}

export type ToOutboxThread =
  /** the first is every webhook the thread must know before it delivers; then each change */
  | { type: 'registry'; changes: RegistryChange[] }
  /** rows were committed to the outbox (or written there by a recovery) */
  | { type: 'kick' }
  | { type: 'idle'; id: number }
  | { type: 'drain' };

export type FromOutboxThread = ThreadLifecycle | { type: 'outcomes'; batch: OutcomeBatch } | { type: 'idle'; id: number; idle: boolean };

export class OutboxDeliveryThread {
  private readonly thread: SupervisedThread<ToOutboxThread, FromOutboxThread>;
  private kickQueued = false;
  private readonly idleQueries = new Map<number, (idle: boolean) => void>();
  private nextQuery = 0;

  constructor(o: {
    config: OutboxThreadConfig;
    /** every webhook now: what a thread (a new one, or one started again) loads first */
    registry: () => RegistryChange[];
    outcomes: (batch: OutcomeBatch) => void;
    logger: Logger;
    /** how a thread is started (a test keeps the Worker, to make it die) */
    spawn?: (entry: URL, workerData: unknown) => Worker;
  }) {
    this.thread = new SupervisedThread<ToOutboxThread, FromOutboxThread>({
      entry: entryBeside(import.meta.url, 'outbox-thread-entry'),
      workerData: o.config,
      name: 'embedded delivery thread',
      logger: o.logger,
      spawn: o.spawn,
      // posted at once, so that every change after this one reaches this thread too, in order
      first: () => ({ type: 'registry', changes: o.registry() }),
      onMessage: (m) => {
        if (m.type === 'outcomes') o.outcomes(m.batch);
        else if (m.type === 'idle') {
          this.idleQueries.get(m.id)?.(m.idle);
          this.idleQueries.delete(m.id);
        }
      },
      onExit: () => {
        // what it held stays in the outbox, with its progress: the next thread hands it over again
        for (const answer of this.idleQueries.values()) answer(false);
        this.idleQueries.clear();
      },
    });
  }

  /** Start the thread; resolves once it has loaded the registry and started reading the outbox. */
  start(): Promise<void> {
    return this.thread.start();
  }

  /** A webhook changed: the thread gets it before any event committed after (postMessage keeps order). */
  registryChanged(change: RegistryChange): void {
    this.thread.post({ type: 'registry', changes: [change] });
  }

  /** Rows were committed: one kick per turn of the engine's loop, however many commits. */
  kick(): void {
    if (this.kickQueued || !this.thread.running) return;
    this.kickQueued = true;
    queueMicrotask(() => {
      this.kickQueued = false;
      this.thread.post({ type: 'kick' });
    });
  }

  /** Nothing held, in flight or being deleted in the thread (true when no thread runs: the outbox says the rest). */
  idle(): Promise<boolean> {
    if (!this.thread.running) return Promise.resolve(true);
    const id = ++this.nextQuery;
    return new Promise<boolean>((resolve) => {
      this.idleQueries.set(id, resolve);
      this.thread.post({ type: 'idle', id });
    });
  }

  /** SIGTERM (CONTRACT 6.6): the thread takes nothing more, finishes its attempts in flight, and exits. */
  drain(): Promise<void> {
    return this.thread.drain();
  }
}
