// A data plane on a worker thread, kept running: the one supervisor of svc serve's delivery threads
// (NATS mode: nats-threads.ts; embedded mode: outbox-thread.ts). It spawns the thread, waits for its
// `ready`, starts another when it dies (what it held stays queued: in JetStream, or in the outbox
// with its progress), and drains it on SIGTERM (CONTRACT 6.6): `drain` posted, its exit awaited,
// no restart after.
//
// The protocol every delivery thread speaks (besides its own messages): it posts `ready` once it
// delivers, `failed` when it cannot go on (then exits), `drained` once a drain is done; it takes
// `drain`.
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import { systemClock, type Clock, type Timer } from '../domain/clock.ts';

/** How long after a thread died another is started. */
export const RESTART_MS = 1000;

export type ThreadLifecycle = { type: 'ready' } | { type: 'drained' } | { type: 'failed'; error: string };

/**
 * A worker thread running `entry` (a module URL: `new URL('./x.ts', import.meta.url)` beside its
 * caller, whose compiled twin is `x.js`). Compiled JavaScript runs as is; TypeScript source
 * (development, tests) runs through tsx's loader, registered in the thread before the entry loads.
 */
export function spawnThread(entry: URL, workerData: unknown): Worker {
  const ts = entry.pathname.endsWith('.ts');
  if (!ts) return new Worker(entry, { workerData });
  const require = createRequire(import.meta.url);
  const tsxDir = path.dirname(require.resolve('tsx/package.json'));
  const api = pathToFileURL(path.join(tsxDir, 'dist/esm/api/index.mjs')).href;
  const code = `import(${JSON.stringify(api)}).then((m) => { m.register(); return import(${JSON.stringify(entry.href)}); })`;
  return new Worker(code, { eval: true, workerData });
}

/** The entry of a module beside `here` (an import.meta.url): `name`.ts from source, `name`.js compiled. */
export function entryBeside(here: string, name: string): URL {
  return new URL(`./${name}${here.endsWith('.ts') ? '.ts' : '.js'}`, here);
}

export interface SupervisedThreadOptions<In, Out> {
  entry: URL;
  workerData: unknown;
  /** how the logs name it ('delivery thread', 'embedded delivery thread') and what they add */
  name: string;
  logFields?: Record<string, unknown>;
  logger: Logger;
  /** posted to each thread (the first and every one started again) before anything else */
  first?: () => In;
  /** the thread's own messages (not ready, failed or drained) */
  onMessage?: (m: Out) => void;
  /** a thread exited (crashed, or drained) */
  onExit?: () => void;
  /** how a thread is started (a test keeps the Worker, to make it die) */
  spawn?: (entry: URL, workerData: unknown) => Worker;
  /** the wait before a restart */
  clock?: Clock;
}

export class SupervisedThread<In extends { type: string }, Out extends { type: string }> {
  private worker: Worker | null = null;
  private draining = false;
  private restart: Timer | null = null;

  constructor(private readonly o: SupervisedThreadOptions<In, Out>) {}

  /** Whether a thread runs now (none between a death and its restart, or after the drain). */
  get running(): boolean {
    return this.worker !== null;
  }

  /** Start the thread; resolves once it is ready, rejects if it fails first (it is started again all the same). */
  start(): Promise<void> {
    const w = (this.o.spawn ?? spawnThread)(this.o.entry, this.o.workerData);
    this.worker = w;
    const first = this.o.first?.();
    if (first) w.postMessage(first);
    const log = { ...this.o.logFields };
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      w.on('message', (m: Out | ThreadLifecycle) => {
        switch (m.type) {
          case 'ready':
            ready = true;
            resolve();
            break;
          case 'drained':
            // after every message it sent before (postMessage keeps the order): nothing more to wait for
            void w.terminate();
            break;
          case 'failed': {
            const error = (m as { error: string }).error;
            this.o.logger.error({ ...log, error }, `${this.o.name} failed`);
            if (!ready) reject(new Error(`the ${this.o.name} failed: ${error}`));
            break;
          }
          default:
            this.o.onMessage?.(m as Out);
        }
      });
      w.on('error', (err) => {
        this.o.logger.error({ ...log, err }, `${this.o.name} crashed`);
        if (!ready) reject(err);
      });
      w.on('exit', (code) => {
        if (this.worker === w) this.worker = null;
        this.o.onExit?.();
        if (this.draining) return;
        this.o.logger.error({ ...log, code }, `${this.o.name} exited; starting it again`);
        this.restart = (this.o.clock ?? systemClock).setTimeout(() => {
          this.restart = null;
          if (!this.draining) void this.start().catch(() => undefined);
        }, RESTART_MS);
      });
    });
  }

  /** To the thread that runs now (dropped when none does: the next one starts from `first`). */
  post(m: In): void {
    this.worker?.postMessage(m);
  }

  /** SIGTERM (CONTRACT 6.6): no restart from now on; the thread takes nothing more, finishes its attempts in flight, and exits. */
  async drain(): Promise<void> {
    this.draining = true;
    this.restart?.cancel();
    this.restart = null;
    const w = this.worker;
    if (!w) return;
    await new Promise<void>((resolve) => {
      w.once('exit', () => resolve());
      w.postMessage({ type: 'drain' });
    });
  }
}
