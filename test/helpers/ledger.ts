// The ledger of a durability test (CONTRACT 6.6): a real HTTP receiver that can answer slowly and
// records, for every POST, the CloudEvent `id` and `subject` of the raw body and the `webhook-id`
// header; the ledger arithmetic (acknowledged = delivered + missing, repeats only of the same
// attempt); a seeded PRNG for "random moments"; the RSS of a process; one Prometheus sample.
import http from 'node:http';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import { later } from './wait.ts';

export interface Delivery {
  /** the webhook's path on the receiver */
  path: string;
  id: string;
  subject: string;
  webhookId: string;
  at: number;
  /** when the answer went (or the client went away); undefined while in flight */
  answeredAt?: number;
}

export interface LedgerReceiver {
  url: string;
  /** every POST, in arrival order */
  deliveries: Delivery[];
  /** POSTs whose answer never left: the client went away first (a killed sender) */
  aborted(): number;
  /** POSTs received and not yet answered */
  inFlight(): number;
  /** the most POSTs to one path ever unanswered at once */
  maxInFlightPerPath(): number;
  /** distinct subjects delivered to a path (any path when omitted) */
  distinct(path?: string): number;
  /** how long each answer waits (ms); changeable at any time */
  delayMs: number;
  close(): Promise<void>;
}

/** A receiver answering `status` (200) after `delayMs` to every POST on any path. */
export async function startLedgerReceiver(opts: { delayMs?: number; status?: number } = {}): Promise<LedgerReceiver> {
  const deliveries: Delivery[] = [];
  const subjectsByPath = new Map<string, Set<string>>();
  const allSubjects = new Set<string>();
  const inFlightByPath = new Map<string, number>();
  let inFlight = 0;
  let maxPerPath = 0;
  let aborted = 0;
  const rx = { delayMs: opts.delayMs ?? 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      let ce: { id?: unknown; subject?: unknown } = {};
      try {
        ce = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        // recorded with empty fields: the ledger then fails on it
      }
      const subject = String(ce.subject ?? '');
      const d: Delivery = { path, id: String(ce.id ?? ''), subject, webhookId: String(req.headers['webhook-id'] ?? ''), at: Date.now() };
      deliveries.push(d);
      let set = subjectsByPath.get(path);
      if (!set) subjectsByPath.set(path, (set = new Set()));
      set.add(subject);
      allSubjects.add(subject);
      inFlight++;
      const n = (inFlightByPath.get(path) ?? 0) + 1;
      inFlightByPath.set(path, n);
      if (n > maxPerPath) maxPerPath = n;
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        d.answeredAt = Date.now();
        inFlight--;
        inFlightByPath.set(path, inFlightByPath.get(path)! - 1);
      };
      res.on('close', () => {
        if (!res.writableFinished) aborted++;
        finish();
      });
      const answer = () => {
        if (!res.destroyed) res.writeHead(opts.status ?? 200, { 'content-type': 'text/plain' }).end('ok');
      };
      if (rx.delayMs > 0) later(rx.delayMs, answer, 'a receiver that holds its answer, as a test asked');
      else answer();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return Object.assign(rx, {
    url,
    deliveries,
    aborted: () => aborted,
    inFlight: () => inFlight,
    maxInFlightPerPath: () => maxPerPath,
    distinct: (path?: string) => (path === undefined ? allSubjects.size : (subjectsByPath.get(path)?.size ?? 0)),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  });
}

export interface Ledger {
  acknowledged: number;
  /** distinct acknowledged subjects delivered */
  delivered: number;
  missing: string[];
  /** deliveries beyond the first of a subject at a webhook */
  repeats: number;
  /** a repeat that is not the same attempt again: another CloudEvent id or webhook-id than the first */
  foreignRepeats: string[];
  /** subjects delivered that were never acknowledged (or ids that are not their own webhook-id) */
  unexpected: string[];
}

/**
 * The ledger of one webhook (its receiver path): every acknowledged subject must have been
 * delivered (missing = acknowledged − delivered); a subject delivered more than once must carry the
 * same CloudEvent id and webhook-id each time (the repeat of an attempt that was in flight).
 */
export function ledgerOf(acknowledged: Iterable<string>, deliveries: readonly Delivery[], path: string): Ledger {
  const acked = new Set(acknowledged);
  const first = new Map<string, Delivery>();
  const foreignRepeats: string[] = [];
  const unexpected: string[] = [];
  let repeats = 0;
  for (const d of deliveries) {
    if (d.path !== path) continue;
    // the delivery watchdog's events about a failing webhook (CONTRACT 4.1) are the engine's own, no
    // producer's fact: not part of the ledger (test/http/watchdog.test.ts counts them)
    if (d.subject.includes('/webhook_delivery/')) continue;
    if (!acked.has(d.subject)) unexpected.push(`${d.subject} (never acknowledged)`);
    if (d.webhookId !== d.id) unexpected.push(`${d.subject}: webhook-id ${d.webhookId} is not the CloudEvent id ${d.id}`);
    const f = first.get(d.subject);
    if (!f) {
      first.set(d.subject, d);
      continue;
    }
    repeats++;
    if (f.id !== d.id || f.webhookId !== d.webhookId)
      foreignRepeats.push(`${d.subject}: id ${f.id} then ${d.id}, webhook-id ${f.webhookId} then ${d.webhookId}`);
  }
  const missing = [...acked].filter((s) => !first.has(s));
  return { acknowledged: acked.size, delivered: acked.size - missing.length, missing, repeats, foreignRepeats, unexpected };
}

/** One line to quote: `ledger <name>: acknowledged A = delivered D + missing M; repeats R …`. */
export function ledgerLine(name: string, l: Ledger, extra = ''): string {
  return (
    `ledger ${name}: acknowledged ${l.acknowledged} = delivered ${l.delivered} + missing ${l.missing.length}; repeats ` +
    `${l.repeats}${extra ? `; ${extra}` : ''}`
  );
}

/** mulberry32: a small seeded PRNG, floats in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** LEDGER_SEED from the environment (to replay a run), else a fresh one. */
export function ledgerSeed(): number {
  const fromEnv = process.env.LEDGER_SEED;
  return fromEnv ? Number(fromEnv) >>> 0 : (Math.random() * 2 ** 32) >>> 0;
}

/** VmRSS of a process in bytes (Linux /proc), or null once it is gone. Threads share it. */
export function rssBytes(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** One sample of GET /metrics, e.g. metric(url, 'svc_deliveries_total', { outcome: 'failure' }); 0 when absent. */
export async function metric(url: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = m[2] ? m[2].split(',') : [];
    if (want.every((w) => have.includes(w))) return Number(m[3]);
  }
  return 0;
}
