// `svc serve` and `svc worker` as child processes (for tests that kill them or restart them):
// each resolves once the process is ready.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import Database from 'better-sqlite3';
import type { JetStreamManager } from '@nats-io/jetstream';
import { undeliveredEvents } from '../../src/bus/nats/jetstream.ts';
import { BIN } from './paths.ts';
import { waitFor } from './service.ts';

/** A svc child process: its exit, and everything it printed so far. */
export interface SvcChild {
  proc: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output: () => string;
}

export interface ChildService extends SvcChild {
  url: string;
}

/** Every child still running; kill them in afterAll/afterEach. */
export const children = new Set<ChildProcess>();

/**
 * Start `svc serve --port 0 --db <db> --allow-private-targets --drift-interval off <extra args>`
 * with no SVC_* variables from this process but those in `env`.
 */
export async function spawnService(db: string, args: string[] = [], env: Record<string, string> = {}): Promise<ChildService> {
  const { child, ready } = spawnSvc(
    ['serve', '--port', '0', '--db', db, '--allow-private-targets', '--drift-interval', 'off', ...args],
    env,
    (out) => /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1] ?? null,
  );
  const url = await ready;
  return { ...child, url };
}

/**
 * Start `svc worker --nats <url> --allow-private-targets <extra args>` (CONTRACT 1) with no SVC_*
 * variables from this process but those in `env` (SVC_DATAPLANE_KEY, see dataplaneKey); resolves
 * once it prints `worker ready`.
 */
export async function spawnWorker(natsUrl: string, args: string[] = [], env: Record<string, string> = {}): Promise<SvcChild> {
  const { child, ready } = spawnSvc(['worker', '--nats', natsUrl, '--allow-private-targets', ...args], env, (out) =>
    out.includes('worker ready') ? 'ready' : null,
  );
  await ready;
  return child;
}

/** `svc dataplane-key --db <db>`: the key a svc worker needs for that engine's events. */
export function dataplaneKey(db: string): string {
  return execFileSync(process.execPath, [BIN, 'dataplane-key', '--db', db], { encoding: 'utf8', env: cleanEnv({}) }).trim();
}

function cleanEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(childEnv)) if (k.startsWith('SVC_')) delete childEnv[k];
  return Object.assign(childEnv, env);
}

/** Spawn bin/svc.mjs with `args`; `ready` resolves with what `readyOn` finds in its output. */
function spawnSvc(
  args: string[],
  env: Record<string, string>,
  readyOn: (out: string) => string | null,
): { child: SvcChild; ready: Promise<string> } {
  const proc = spawn(process.execPath, [BIN, ...args], { env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
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
  const ready = new Promise<string>((resolve, reject) => {
    // generous: a start takes 1-3 s, but on 2 cores beside other test files it has taken over 20 s
    const timer = setTimeout(() => reject(new Error(`svc ${args[0]} did not start:\n${out}`)), 40_000);
    const onData = () => {
      const found = readyOn(out);
      if (found !== null) {
        clearTimeout(timer);
        proc.stdout!.off('data', onData);
        resolve(found);
      }
    };
    proc.stdout!.on('data', onData);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`svc ${args[0]} exited (${code ?? signal}) before it was ready:\n${out}`));
    });
  });
  return { child: { proc, exited, output: () => out }, ready };
}

/** Rows in the outbox of a database file (committed events not yet handed on), read-only. */
/**
 * Events committed and not yet handed on: outbox rows, and (NATS mode) events queued in their
 * history row after the relay's cursor (src/handoff/relay-queues.ts).
 */
export function queuedCount(db: string): number {
  const h = new Database(db, { readonly: true, fileMustExist: true });
  try {
    const outbox = (h.prepare('SELECT COUNT(*) AS n FROM outbox').get() as { n: number }).n;
    const history = (
      h.prepare('SELECT COUNT(*) AS n FROM events WHERE seq > (SELECT events_seq FROM relay_cursor) AND batch IS NOT NULL').get() as {
        n: number;
      }
    ).n;
    return outbox + history;
  } finally {
    h.close();
  }
}

/**
 * Wait until svc, seen from outside (a child process, or one that was killed), has delivered or
 * failed every event committed so far, as TestService.settled() does in process: the outbox is
 * empty (in embedded mode a row lives until every attempt it needs has an outcome) and, with `jsm`
 * (NATS mode), so is the SVC_EVENTS work queue, as its consumer tells (a message is acked once its
 * attempts are done; see undeliveredEvents).
 * After it, nothing more will be delivered.
 */
export async function childSettled(db: string, opts: { jsm?: JetStreamManager; timeoutMs?: number } = {}): Promise<void> {
  await waitFor(
    // null (a consumer electing its leader cannot tell): not settled yet
    async () => queuedCount(db) === 0 && (!opts.jsm || (await undeliveredEvents(opts.jsm)) === 0),
    opts.timeoutMs ?? 15_000,
    'every committed event to be delivered',
  );
}

/** The warnings and errors in a child's log (pino's level 40 and above), the last few. */
export function childWarnings(log: string): string {
  const lines = log.split('\n').filter((l) => /"level":(4|5|6)\d/.test(l));
  return lines.length ? lines.slice(-8).join('\n') : 'none';
}

/** SIGTERM; resolves the exit code and how long the exit took. */
export async function sigterm(c: SvcChild): Promise<{ code: number | null; ms: number }> {
  const t0 = Date.now();
  c.proc.kill('SIGTERM');
  const { code } = await c.exited;
  return { code, ms: Date.now() - t0 };
}
