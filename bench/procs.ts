// Processes of the benchmark: nats-servers, redis-server, `svc serve`, `svc worker`, the embedded
// svc, the baseline and the peer; each a child of the bench process, killed when it exits. Also
// svc's API (orgs, webhooks) and /metrics as the bench uses them.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { startNatsServer } from '../test/helpers/nats-server.ts';
import { childPids } from './harness.ts';

export const ROOT = path.resolve(import.meta.dirname, '..');
/**
 * The svc checkout under test (BENCH_SVC_ROOT; default this one): its bin/svc.mjs runs serve,
 * worker and the CLI, and the embedded child loads its dist/. The bench itself (producer,
 * receiver, floor, peer) always runs from ROOT, so two checkouts are measured by the same bench.
 */
export const SVC_ROOT = path.resolve(process.env.BENCH_SVC_ROOT || ROOT);
const SVC_BIN = path.join(SVC_ROOT, 'bin', 'svc.mjs');

/** Node flags for every svc process (serve and worker), e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`. */
export const SVC_NODE_ARGS = (process.env.BENCH_SVC_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
/** More options for every `svc serve` (e.g. `--event-retention 0`), after the bench's own. */
export const SVC_SERVE_ARGS = (process.env.BENCH_SVC_SERVE_ARGS ?? '').split(/\s+/).filter(Boolean);
/**
 * The per-org shares of CONTRACT §8 lifted (API queue, fact rate, events kept): nothing the bench
 * measures is limited by them. Given as variables, which a build from before them ignores.
 */
export const UNLIMITED_ORG_ENV = { SVC_API_QUEUE_PER_ORG: '0', SVC_INGEST_RATE_PER_ORG: '0', SVC_MAX_EVENTS_PER_ORG: '0' };

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

export function log(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Child {
  child: ChildProcess;
  pid: number | null;
  /** the stdout line that said it was ready */
  line: string;
  /** every stdout line so far (pino JSON for svc) */
  lines: string[];
  logFile: string;
}

/** Spawn a node child; resolves once a stdout line satisfies `ready`. */
export function spawnChild(
  name: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: (line: string) => boolean,
  logFile: string,
): Promise<Child> {
  return spawnProcess(name, process.execPath, args, env, ready, logFile);
}

/** Spawn a child (cwd: this checkout); resolves once a stdout line satisfies `ready`. */
export async function spawnProcess(
  name: string,
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: (line: string) => boolean,
  logFile: string,
): Promise<Child> {
  const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  const out = fs.createWriteStream(logFile);
  child.once('exit', () => {
    children.delete(child);
    out.end();
  });
  const lines: string[] = [];
  let buf = '';
  const line = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within 30 s; log: ${logFile}`)), 30_000);
    child.stdout!.on('data', (c: Buffer) => {
      out.write(c);
      buf += c.toString('utf8');
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const l = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        lines.push(l);
        if (ready(l)) {
          clearTimeout(timer);
          resolve(l);
        }
      }
    });
    child.stderr!.on('data', (c: Buffer) => out.write(c));
    child.once('exit', (code, sig) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? sig}) before it was ready; log: ${logFile}`));
    });
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`${name} could not start: ${err.message}`));
    });
  });
  return { child, pid: child.pid ?? null, line, lines, logFile };
}

export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(t);
}

/** pino lines at warn or above, except the expected one about running without NATS credentials. */
export function warnings(lines: string[]): string[] {
  return lines.filter((l) => /"level":(40|50|60)/.test(l) && !l.includes('no --nats-creds'));
}

// ------------------------------------------------------------------------------- nats-server

export interface Nats {
  url: string;
  pid: number | null;
  stop(): Promise<void>;
}

/** A private nats-server (JetStream, temp dir, free port) and its pid, for CPU accounting. */
export async function startNats(): Promise<Nats> {
  const before = new Set(childPids('nats-server'));
  const h = await startNatsServer();
  const pid = childPids('nats-server').find((p) => !before.has(p)) ?? null;
  return { url: h.url, pid, stop: () => h.stop() };
}

// ------------------------------------------------------------------------------- redis-server

/** Debian's redis-server, or $BENCH_REDIS_SERVER. */
const REDIS_SERVER = process.env.BENCH_REDIS_SERVER || '/usr/bin/redis-server';

export interface Redis {
  port: number;
  pid: number | null;
  stop(): Promise<void>;
}

/** A free loopback port (closed again: whoever binds it next gets it, barring a race). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A private redis-server for the peer: loopback, a free port (never the system's 6379), the
 * append-only file fsynced once a second and no RDB snapshots, in `dir`. Stopped with SIGTERM
 * (and killed with the bench process like every child).
 */
export async function startRedis(dir: string, logFile: string): Promise<Redis> {
  if (!fs.existsSync(REDIS_SERVER))
    throw new Error(
      `no redis-server at ${REDIS_SERVER}: install it (Debian: redis-server), set BENCH_REDIS_SERVER, or leave the peer out ` +
        `(BENCH_PEER=off)`,
    );
  fs.mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const c = await spawnProcess(
    'redis-server',
    REDIS_SERVER,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--appendonly',
      'yes',
      '--appendfsync',
      'everysec',
      '--save',
      '',
      '--dir',
      dir,
      '--daemonize',
      'no',
    ],
    {},
    (l) => l.includes('Ready to accept connections'),
    logFile,
  );
  return { port, pid: c.pid, stop: () => stopChild(c.child) };
}

// ------------------------------------------------------------------------------- svc

export interface Svc extends Child {
  url: string;
}

/**
 * `svc serve --nats … --no-local-runner --allow-private-targets --drift-interval off` on a fresh
 * port, plus `extra` (e.g. --no-deliver, --delivery-threads 0).
 */
export async function startSvcServe(o: { natsUrl: string; db: string; logFile: string; extra?: string[] }): Promise<Svc> {
  const c = await spawnChild(
    'svc serve',
    [
      ...SVC_NODE_ARGS,
      SVC_BIN,
      'serve',
      '--nats',
      o.natsUrl,
      '--db',
      o.db,
      '--port',
      '0',
      '--no-local-runner',
      '--allow-private-targets',
      '--drift-interval',
      'off',
      ...(o.extra ?? []),
      ...SVC_SERVE_ARGS,
    ],
    UNLIMITED_ORG_ENV,
    (l) => l.includes('listening on'),
    o.logFile,
  );
  return { ...c, url: /listening on (http:\/\/[^\s"]+)/.exec(c.line)![1] };
}

/** `svc dataplane-key --db …`: the key a svc worker needs (SVC_DATAPLANE_KEY). */
export function dataplaneKey(db: string): string {
  return execFileSync(process.execPath, [SVC_BIN, 'dataplane-key', '--db', db], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
    .toString()
    .trim();
}

export interface OrgAuth {
  org_id: string;
  api_token: string;
}

/**
 * `svc orgs create --db …` of the checkout under test: the database is created (and migrated) by
 * the svc that will open it, whichever commit that is.
 */
export function createSvcOrg(db: string, name: string): OrgAuth {
  const out = execFileSync(process.execPath, [SVC_BIN, 'orgs', 'create', '--name', name, '--db', db], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  }).toString();
  const line = out.trim().split('\n').pop() ?? '';
  const org = JSON.parse(line) as OrgAuth;
  return { org_id: org.org_id, api_token: org.api_token };
}

/** `svc worker --nats … --allow-private-targets --delivery-concurrency N`; resolves at `worker ready`. */
export async function startSvcWorker(o: { natsUrl: string; key: string; concurrency: number; logFile: string }): Promise<Child> {
  return spawnChild(
    'svc worker',
    [...SVC_NODE_ARGS, SVC_BIN, 'worker', '--nats', o.natsUrl, '--allow-private-targets', '--delivery-concurrency', String(o.concurrency)],
    { SVC_DATAPLANE_KEY: o.key },
    (l) => l.includes('worker ready'),
    o.logFile,
  );
}

export interface SvcCounters {
  deliveries_success: number;
  deliveries_failure: number;
  ingest_accepted: number;
  events_dropped: number;
  /** events per message the relay published on the durable hop (NATS mode, issue 20; null before it) */
  hop_events_per_message: number | null;
}

/** The counters the bench checks, from svc's /metrics. */
export async function svcCounters(url: string): Promise<SvcCounters> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const pick = (re: RegExp) => Number(re.exec(text)?.[1] ?? 0);
  let dropped = 0;
  for (const m of text.matchAll(/^svc_events_dropped_total\{[^}]*\} (\d+)/gm)) dropped += Number(m[1]);
  return {
    deliveries_success: pick(/^svc_deliveries_total\{outcome="success"\} (\d+)/m),
    deliveries_failure: pick(/^svc_deliveries_total\{outcome="failure"\} (\d+)/m),
    ingest_accepted: pick(/^svc_ingest_messages_total\{result="accepted"\} (\d+)/m),
    events_dropped: dropped,
    // null where nothing went through the hop (embedded mode, or an svc from before it)
    hop_events_per_message:
      pick(/^svc_hop_batch_events_count (\d+)/m) > 0
        ? pick(/^svc_hop_batch_events_sum (\d+)/m) / pick(/^svc_hop_batch_events_count (\d+)/m)
        : null,
  };
}

/**
 * Waits until svc has counted `n` more delivery outcomes than `before` (outcomes come back from the
 * data planes in batches), at most `ms`; returns the counters then.
 */
export async function awaitOutcomes(url: string, before: SvcCounters, n: number, ms: number): Promise<SvcCounters> {
  const until = Date.now() + ms;
  for (;;) {
    const now = await svcCounters(url);
    const got = now.deliveries_success + now.deliveries_failure - before.deliveries_success - before.deliveries_failure;
    if (got >= n || Date.now() > until) return now;
    await sleep(100);
  }
}

/**
 * Webhooks over the HTTP API: `all_events`, signed (a secret), one per URL; at most `parallel`
 * requests at a time.
 */
export async function createWebhooks(svcUrl: string, org: OrgAuth, urls: string[], parallel = 1): Promise<void> {
  const headers = { authorization: `Bearer ${org.api_token}`, 'x-svc-org-id': org.org_id, 'content-type': 'application/json' };
  let next = 0;
  const one = async () => {
    while (next < urls.length) {
      const i = next++;
      // a secret of its own, as real webhooks have (and as the peer signs): no signature is shared
      const res = await fetch(`${svcUrl}/v1/orgs/current/webhooks`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ webhook_url: urls[i], secret: `whsec_bench_${org.org_id}_${i}`, interests: { all_events: true } }),
      });
      if (res.status !== 201 && res.status !== 200) throw new Error(`creating a webhook: HTTP ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, parallel) }, one));
}
