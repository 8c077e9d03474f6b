// Embedded mode's delivery thread, seen from the engine's thread: it spawns the thread
// (src/relay/local-thread.ts: the outbox relay, the pipeline, the deliverer and the outcome
// batches, over a SQLite connection of its own to the same file), feeds it the webhook registry,
// tells it that rows were committed, takes its outcome batches back, asks it whether it is idle,
// drains it on SIGTERM (CONTRACT 6.6) and starts it again when it dies.
//
// The engine's thread sends only a kick per commit, never the rows: the thread reads them from the
// outbox itself, so a commit costs the engine one postMessage whatever the fan-out.
import type { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { OutcomeBatch } from '../outcomes/outcome.ts';
import type { WebhookEntry } from '../domain/webhook-entry.ts';
import type { DeliveryLimits } from '../dataplane/data-plane.ts';
import { entryBeside, spawnThread } from '../dataplane/threads.ts';

export interface LocalThreadConfig {
  /** the database file (its own connection: WAL, busy_timeout, src/store/db.ts) */
  db: string;
  limits: DeliveryLimits;
  logLevel: string;
}

/** A webhook at version v (entry null: deleted), as the registry relay publishes it. */
export interface RegistryChange {
  orgId: string;
  webhookId: string;
  v: number;
  entry: WebhookEntry | null;
}

export type ToLocalThread =
  /** the first is every webhook the thread must know before it delivers; then each change */
  | { type: 'registry'; changes: RegistryChange[] }
  /** rows were committed to the outbox (or written there by a recovery) */
  | { type: 'kick' }
  | { type: 'idle'; id: number }
  | { type: 'drain' };

export type FromLocalThread =
  | { type: 'ready' }
  | { type: 'outcomes'; batch: OutcomeBatch }
  | { type: 'idle'; id: number; idle: boolean }
  | { type: 'drained' }
  | { type: 'failed'; error: string };

/** How long after a thread died another is started. */
const RESTART_MS = 1000;

export class LocalDeliveryThread {
  private worker: Worker | null = null;
  private draining = false;
  private kickQueued = false;
  private readonly idleQueries = new Map<number, (idle: boolean) => void>();
  private nextQuery = 0;
  private restartTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly o: {
      config: LocalThreadConfig;
      /** every webhook now: what a thread (a new one, or one started again) loads first */
      registry: () => RegistryChange[];
      outcomes: (batch: OutcomeBatch) => void;
      logger: Logger;
      /** how a thread is started (a test keeps the Worker, to make it die) */
      spawn?: (entry: URL, workerData: LocalThreadConfig) => Worker;
    },
  ) {}

  /** Start the thread; resolves once it has loaded the registry and started reading the outbox. */
  start(): Promise<void> {
    const w = (this.o.spawn ?? spawnThread)(entryBeside(import.meta.url, 'local-thread'), this.o.config);
    this.worker = w;
    // posted at once, so that every change after this one reaches this thread too, in order
    this.post({ type: 'registry', changes: this.o.registry() });
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      w.on('message', (m: FromLocalThread) => {
        switch (m.type) {
          case 'outcomes':
            this.o.outcomes(m.batch);
            break;
          case 'idle':
            this.idleQueries.get(m.id)?.(m.idle);
            this.idleQueries.delete(m.id);
            break;
          case 'ready':
            ready = true;
            resolve();
            break;
          case 'drained':
            // after every outcome batch it sent (messages keep their order): nothing more to wait for
            void w.terminate();
            break;
          case 'failed':
            this.o.logger.error({ error: m.error }, 'embedded delivery thread failed');
            if (!ready) reject(new Error(`the delivery thread failed: ${m.error}`));
            break;
        }
      });
      w.on('error', (err) => {
        this.o.logger.error({ err: String(err) }, 'embedded delivery thread crashed');
        if (!ready) reject(err);
      });
      w.on('exit', (code) => {
        if (this.worker === w) this.worker = null;
        for (const answer of this.idleQueries.values()) answer(false);
        this.idleQueries.clear();
        if (this.draining) return;
        // what it held stays in the outbox, with its progress: the next thread hands it over again
        this.o.logger.error({ code }, 'embedded delivery thread exited; starting it again');
        this.restartTimer = setTimeout(() => {
          this.restartTimer = null;
          if (!this.draining) void this.start().catch(() => undefined);
        }, RESTART_MS);
        this.restartTimer.unref();
      });
    });
  }

  /** A webhook changed: the thread gets it before any event committed after (postMessage keeps order). */
  registryChanged(change: RegistryChange): void {
    this.post({ type: 'registry', changes: [change] });
  }

  /** Rows were committed: one kick per turn of the engine's loop, however many commits. */
  kick(): void {
    if (this.kickQueued || !this.worker) return;
    this.kickQueued = true;
    queueMicrotask(() => {
      this.kickQueued = false;
      this.post({ type: 'kick' });
    });
  }

  /** Nothing held, in flight or being deleted in the thread (true when no thread runs: the outbox says the rest). */
  idle(): Promise<boolean> {
    if (!this.worker) return Promise.resolve(true);
    const id = ++this.nextQuery;
    return new Promise<boolean>((resolve) => {
      this.idleQueries.set(id, resolve);
      this.post({ type: 'idle', id });
    });
  }

  /** SIGTERM (CONTRACT 6.6): the thread takes nothing more, finishes its attempts in flight, and exits. */
  async drain(): Promise<void> {
    this.draining = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    const w = this.worker;
    if (!w) return;
    await new Promise<void>((resolve) => {
      w.once('exit', () => resolve());
      this.post({ type: 'drain' });
    });
  }

  private post(m: ToLocalThread): void {
    this.worker?.postMessage(m);
  }
}
