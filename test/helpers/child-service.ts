// `svc serve` as a child process (for tests that kill it or restart it): resolves once it listens.
import { spawn, type ChildProcess } from 'node:child_process';
import Database from 'better-sqlite3';
import type { JetStreamManager } from '@nats-io/jetstream';
import { EVENTS_STREAM } from '../../src/bus/jetstream.ts';
import { BIN } from './paths.ts';
import { waitFor } from './service.ts';

export interface ChildService {
  proc: ChildProcess;
  url: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output: () => string;
}

/** Every child still running; kill them in afterAll/afterEach. */
export const children = new Set<ChildProcess>();

/**
 * Start `svc serve --port 0 --db <db> --allow-private-targets --drift-interval off <extra args>`
 * with no SVC_* variables from this process but those in `env`.
 */
export async function spawnService(db: string, args: string[] = [], env: Record<string, string> = {}): Promise<ChildService> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(childEnv)) if (k.startsWith('SVC_')) delete childEnv[k];
  Object.assign(childEnv, env);
  const proc = spawn(
    process.execPath,
    [BIN, 'serve', '--port', '0', '--db', db, '--allow-private-targets', '--drift-interval', 'off', ...args],
    { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.add(proc);
  let out = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d));
  proc.stderr!.on('data', (d: Buffer) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once('exit', (code, signal) => {
      children.delete(proc);
      resolve({ code, signal });
    }),
  );
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`svc did not start:\n${out}`)), 20_000);
    const onData = () => {
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        proc.stdout!.off('data', onData);
        resolve(m[1]);
      }
    };
    proc.stdout!.on('data', onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`svc exited (${code ?? signal}) before listening:\n${out}`));
    });
  });
  return { proc, url, exited, output: () => out };
}

/** Rows in the outbox of a database file (committed events not yet handed on), read-only. */
export function outboxCount(db: string): number {
  const h = new Database(db, { readonly: true, fileMustExist: true });
  try {
    return (h.prepare('SELECT COUNT(*) AS n FROM outbox').get() as { n: number }).n;
  } finally {
    h.close();
  }
}

/**
 * Wait until svc, seen from outside (a child process, or one that was killed), has delivered or
 * failed every event committed so far, as TestService.settled() does in process: the outbox is
 * empty (in embedded mode a row lives until every attempt it needs has an outcome) and, with `jsm`
 * (NATS mode), so is the SVC_EVENTS work queue (a message is acked once its attempts are done).
 * After it, nothing more will be delivered.
 */
export async function childSettled(db: string, opts: { jsm?: JetStreamManager; timeoutMs?: number } = {}): Promise<void> {
  await waitFor(
    async () => outboxCount(db) === 0 && (!opts.jsm || (await opts.jsm.streams.info(EVENTS_STREAM)).state.messages === 0),
    opts.timeoutMs ?? 15_000,
    'every committed event to be delivered',
  );
}
