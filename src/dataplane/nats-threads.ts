// svc serve's data plane off the engine's event loop: N worker threads, each a NATS data plane
// (src/dataplane/thread.ts) with its own connection, sharing the durable consumer with each other
// and with any svc worker process. A thread that dies is started again.
import { Worker } from 'node:worker_threads';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import type { DeliveryLimits } from './data-plane.ts';

export interface ThreadConfig {
  natsUrl: string;
  credsFile: string | null;
  /** base64 data plane key */
  key: string;
  limits: DeliveryLimits;
  workerId: string;
  logLevel: string;
}

export type ToThread = { type: 'drain' };
export type FromThread = { type: 'ready' } | { type: 'drained' } | { type: 'failed'; error: string };

/**
 * A worker thread running `entry` (a module URL: `new URL('./x.ts', import.meta.url)` beside its
 * caller, whose compiled twin is `x.js`). Compiled JavaScript runs as is; TypeScript source
 * (development, tests) runs through tsx's loader, registered in the thread before the entry loads.
 * Shared by the NATS delivery threads (./thread.ts) and embedded mode's (src/relay/local-thread.ts).
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

function spawn(config: ThreadConfig): Worker {
  return spawnThread(entryBeside(import.meta.url, 'thread'), config);
}

export class DeliveryThreads {
  private readonly workers = new Set<Worker>();
  private draining = false;

  constructor(
    private readonly count: number,
    private readonly config: Omit<ThreadConfig, 'workerId'> & { workerIdPrefix: string },
    private readonly logger: Logger,
  ) {}

  /** Start every thread; resolves when each has loaded the registry and started pulling. */
  async start(): Promise<void> {
    await Promise.all(Array.from({ length: this.count }, (_, i) => this.startOne(i)));
  }

  private startOne(i: number): Promise<void> {
    const { workerIdPrefix, ...rest } = this.config;
    const w = spawn({ ...rest, workerId: `${workerIdPrefix}_t${i}` });
    this.workers.add(w);
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      w.on('message', (m: FromThread) => {
        if (m.type === 'ready') {
          ready = true;
          resolve();
        } else if (m.type === 'failed') {
          this.logger.error({ thread: i, error: m.error }, 'delivery thread failed');
        }
      });
      w.on('error', (err) => {
        this.logger.error({ thread: i, err: String(err) }, 'delivery thread crashed');
        if (!ready) reject(err);
      });
      w.on('exit', (code) => {
        this.workers.delete(w);
        if (this.draining) return;
        this.logger.error({ thread: i, code }, 'delivery thread exited; starting it again');
        setTimeout(() => void this.startOne(i).catch(() => undefined), 1000).unref();
      });
    });
  }

  /** Drain every thread (CONTRACT 6.6) and wait for them to exit. */
  async drain(): Promise<void> {
    this.draining = true;
    await Promise.all(
      [...this.workers].map(
        (w) =>
          new Promise<void>((resolve) => {
            w.once('exit', () => resolve());
            w.postMessage({ type: 'drain' } satisfies ToThread);
          }),
      ),
    );
  }
}
