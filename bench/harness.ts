// Benchmark harness: the webhook receiver, the producer's load phases and the statistics.
// The receiver and the producer run in the bench process, so both share one clock: the latency
// of a delivery is its receipt time minus the time its fact was sent (performance.now()).
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { ingestSubject, producerInboxPrefix } from '../src/bus/subjects.ts';

/** External workflow ids are `bwf_<seq>`: the receiver finds the seq in the delivered body. */
export const WF_PREFIX = 'bwf_';
const MARK = Buffer.from(WF_PREFIX);

export function workflowId(seq: number): string {
  return `${WF_PREFIX}${seq}`;
}

/** The seq of the first `bwf_<digits>` in a body, or -1. */
export function seqOf(body: Buffer): number {
  const i = body.indexOf(MARK);
  if (i < 0) return -1;
  let n = 0;
  let j = i + MARK.length;
  const start = j;
  for (; j < body.length; j++) {
    const c = body[j];
    if (c < 48 || c > 57) break;
    n = n * 10 + (c - 48);
  }
  return j > start ? n : -1;
}

/** One external workflow fact (CONTRACT 5.2): a new workflow, `started`. Every seq is a distinct fact. */
export function factFor(seq: number): string {
  return JSON.stringify({
    kind: 'workflow',
    transition: 'started',
    workflow: { id: workflowId(seq), type: 'provision', owner_id: 'inst_bench', owner_type: 'installs' },
  });
}

// ------------------------------------------------------------------------------- receiver

interface Sink {
  record(seq: number, at: number, bytes: number): void;
}

export interface BenchReceiver {
  url: string;
  /** where deliveries go; deliveries of no phase (stragglers) are counted as stray */
  sink: Sink | null;
  stray: number;
  requests: number;
  close(): Promise<void>;
}

/**
 * node:http, keep-alive, answers 204 as soon as the request body has arrived, or `delayMs` after
 * (a slow webhook: the receipt is still timed when the body arrives).
 */
export async function startBenchReceiver(opts: { delayMs?: number } = {}): Promise<BenchReceiver> {
  const delay = opts.delayMs ?? 0;
  const r: BenchReceiver = {
    url: '',
    sink: null,
    stray: 0,
    requests: 0,
    close: async () => {},
  };
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      r.requests++;
      const seq = seqOf(body);
      if (r.sink && seq >= 0) r.sink.record(seq, at, body.length);
      else r.stray++;
      if (delay > 0) setTimeout(() => res.writeHead(204).end(), delay);
      else res.writeHead(204).end();
    });
  });
  server.headersTimeout = 65_000;
  server.maxRequestsPerSocket = 0;
  Object.assign(r, await listenOnLoopback(server));
  return r;
}

/** A bench server listening on a free loopback port: its URL, and a close() that drops every connection. */
export async function listenOnLoopback(server: http.Server): Promise<{ url: string; close(): Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ------------------------------------------------------------------------------- CPU accounting

const TICK_MS = 10; // USER_HZ is 100 on Linux

/**
 * CPU time (user + system) a process has used so far, ms, all its threads; with `mainThread`, its
 * main thread's only (svc's engine: the thread that commits facts, publishes and answers; the rest
 * is its delivery threads, the checkpoint thread and V8's helpers). Null off Linux or when gone.
 */
export function cpuMsOf(pid: number, mainThread = false): number | null {
  try {
    const stat = fs.readFileSync(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * TICK_MS; // utime, stime (fields 14 and 15)
  } catch {
    return null;
  }
}

/** The pids of the direct children of this process running `comm` (e.g. the nats-servers the helper started). */
export function childPids(comm: string): number[] {
  const out: number[] = [];
  try {
    for (const d of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
        const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        if (name === comm && ppid === process.pid) out.push(Number(d));
      } catch {
        /* gone */
      }
    }
  } catch {
    /* no /proc */
  }
  return out;
}

/** The pid of a direct child of this process running `comm`, or null. */
export function childPid(comm: string): number | null {
  return childPids(comm)[0] ?? null;
}

/** Resident memory of a process now (VmRSS) and at its peak so far (VmHWM), KiB; null off Linux or when gone. */
export function memKbOf(pid: number): { rss: number; hwm: number } | null {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = /^VmRSS:\s+(\d+) kB/m.exec(status);
    const hwm = /^VmHWM:\s+(\d+) kB/m.exec(status);
    return rss && hwm ? { rss: Number(rss[1]), hwm: Number(hwm[1]) } : null;
  } catch {
    return null;
  }
}

/** Samples a process's VmRSS every `everyMs` until stopped; reports the first, peak and last sample, MiB. */
export function sampleRss(
  pid: number | null,
  everyMs = 20,
): { stop(): { start_mib: number | null; peak_mib: number | null; end_mib: number | null; hwm_mib: number | null; samples: number } } {
  const first = pid ? memKbOf(pid) : null;
  let peak = first?.rss ?? 0;
  let last = first;
  let samples = first ? 1 : 0;
  const timer = setInterval(() => {
    const m = pid ? memKbOf(pid) : null;
    if (!m) return;
    samples++;
    last = m;
    if (m.rss > peak) peak = m.rss;
  }, everyMs);
  const mib = (kb: number | null | undefined) => (kb === null || kb === undefined ? null : Math.round((kb / 1024) * 10) / 10);
  return {
    stop() {
      clearInterval(timer);
      const m = pid ? memKbOf(pid) : null;
      if (m) {
        samples++;
        last = m;
        if (m.rss > peak) peak = m.rss;
      }
      return {
        start_mib: mib(first?.rss),
        peak_mib: samples ? mib(peak) : null,
        end_mib: mib(last?.rss),
        hwm_mib: mib(last?.hwm),
        samples,
      };
    },
  };
}

/**
 * Processes whose CPU time a phase reports: the system under test, nats-server; the bench process
 * itself is added. A list is reported as the sum of its processes (the peer's `sut` is its ingest
 * and its worker); `{ mainThreadOf }` is that process's main thread alone.
 */
export type CpuPids = Record<string, number | number[] | { mainThreadOf: number } | null>;

/** svc's CPU figures: the process (`sut`), its engine's thread (`sut_main`), and nats-server. */
export function svcCpuPids(svcPid: number | null | undefined, natsPid: number | null | undefined): CpuPids {
  return { sut: svcPid ?? null, sut_main: svcPid ? { mainThreadOf: svcPid } : null, nats: natsPid ?? null };
}

/** CPU time of every process of a list, ms; null when any is unknown. */
function cpuMsOfAll(pids: number[]): number | null {
  let sum = 0;
  for (const pid of pids) {
    const ms = cpuMsOf(pid);
    if (ms === null) return null;
    sum += ms;
  }
  return sum;
}

/** One entry of a CpuPids: a process, the sum of a list, or a process's main thread. */
function cpuMsOfEntry(pid: CpuPids[string]): number | null {
  if (!pid) return null;
  if (Array.isArray(pid)) return cpuMsOfAll(pid);
  if (typeof pid === 'object') return cpuMsOf(pid.mainThreadOf, true);
  return cpuMsOf(pid);
}

export function cpuSnapshot(pids: CpuPids): Record<string, number | null> {
  const out: Record<string, number | null> = {};
  for (const [k, pid] of Object.entries(pids)) out[k] = cpuMsOfEntry(pid);
  const u = process.cpuUsage();
  out.bench = (u.user + u.system) / 1000;
  return out;
}

// ------------------------------------------------------------------------------- producers

const producers = new Map<string, Promise<NatsConnection>>();

/**
 * The producer of an org on nc's server: a connection of its own whose request inbox is the org's
 * (`_INBOX_<org>`, CONTRACT 5.2: svc answers no other), kept for the whole run.
 */
function producerOf(nc: NatsConnection, orgId: string): Promise<NatsConnection> {
  const server = nc.getServer();
  const key = `${server} ${orgId}`;
  let p = producers.get(key);
  if (!p) {
    // noAsyncTraces: no stack captured per request, which halves the producer's CPU per request
    p = connect({ servers: server, name: `bench-producer-${orgId}`, inboxPrefix: producerInboxPrefix(orgId), noAsyncTraces: true });
    producers.set(key, p);
  }
  return p;
}

/** Close the producer connections made for nc's server (before that server stops: a connection to a stopped one may not drain). */
export async function closeProducersOf(nc: NatsConnection): Promise<void> {
  const prefix = `${nc.getServer()} `;
  const mine = [...producers.entries()].filter(([k]) => k.startsWith(prefix));
  for (const [k] of mine) producers.delete(k);
  await Promise.allSettled(mine.map(async ([, p]) => (await p).drain()));
}

/** Close every producer connection made by the phases. */
export async function closeProducers(): Promise<void> {
  const all = [...producers.values()];
  producers.clear();
  await Promise.allSettled(all.map(async (p) => (await p).drain()));
}

// ------------------------------------------------------------------------------- load phases

export interface PhaseOptions {
  name: string;
  orgId: string;
  fanout: number;
  /** facts to send; seqs firstSeq .. firstSeq + events - 1 */
  events: number;
  firstSeq: number;
  /**
   * closed loop: at most this many facts outstanding (sent, not yet delivered to every webhook);
   * ignored when ratePerSec is set
   */
  window?: number;
  /** open loop: send at this many facts per second, whatever happens downstream */
  ratePerSec?: number;
  /** stop sending after this long; then wait at most drainMs for what is still coming */
  timeLimitMs: number;
  drainMs: number;
  /** processes whose CPU time to report for the phase */
  cpuPids?: CpuPids;
}

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export interface PhaseResult {
  name: string;
  mode: 'closed' | 'paced';
  fanout: number;
  window: number | null;
  rate_events_per_sec: number | null;
  /** paced only: deliveries/s offered (facts/s × fan-out) */
  offered_deliveries_per_sec: number | null;
  events_planned: number;
  events_sent: number;
  events_complete: number;
  deliveries_expected: number;
  deliveries: number;
  duplicates: number;
  missing: number;
  ingest_errors: number;
  timed_out: boolean;
  /** first send → last delivery */
  duration_ms: number;
  /** last send → last delivery: a few ms when the system keeps up with a paced load, seconds when it falls behind */
  tail_ms: number;
  /**
   * paced only: everything arrived and the last delivery came within KEPT_UP_TAIL_MS of the last send
   * (otherwise the offered load was above capacity and the latencies are mostly queueing); null when closed
   */
  kept_up: boolean | null;
  deliveries_per_sec: number;
  /** the same rate between the 10th and the 90th percentile of receipts (ramp-up/drain left out) */
  steady_deliveries_per_sec: number;
  events_per_sec: number;
  body_bytes_mean: number;
  /** send → receipt at the receiver, per delivery, ms */
  latency_ms: Percentiles;
  /** send → {ok: true} from the ingest request, per fact, ms */
  ack_ms: Percentiles;
  /** CPU time used during the phase per process (sut = system under test), ms, and per delivery, µs */
  cpu_ms: Record<string, number | null>;
  cpu_us_per_delivery: Record<string, number | null>;
}

/** A paced phase kept up when its last delivery came at most this long after its last send. */
export const KEPT_UP_TAIL_MS = 500;

export function percentiles(values: Float64Array): Percentiles {
  if (values.length === 0) return { p50: NaN, p90: NaN, p99: NaN, max: NaN, mean: NaN };
  const s = Float64Array.from(values).sort();
  const at = (q: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
  let sum = 0;
  for (const v of s) sum += v;
  const r = (v: number) => Math.round(v * 100) / 100;
  return { p50: r(at(0.5)), p90: r(at(0.9)), p99: r(at(0.99)), max: r(s[s.length - 1]), mean: r(sum / s.length) };
}

/**
 * Run one phase: the producer sends `events` distinct facts as NATS requests on
 * svc.ingest.<org>.workflows.<wf>; the receiver counts and times every delivery.
 */
export async function runPhase(server: NatsConnection, receiver: BenchReceiver, o: PhaseOptions): Promise<PhaseResult> {
  const nc = await producerOf(server, o.orgId);
  const n = o.fanout;
  const sentAt = new Float64Array(o.events);
  const ackMs = new Float64Array(o.events);
  const got = new Uint16Array(o.events);
  const lat = new Float64Array(o.events * n);
  const receivedAt = new Float64Array(o.events * n);
  let deliveries = 0;
  let duplicates = 0;
  let bytes = 0;
  let sent = 0;
  let acked = 0;
  let complete = 0;
  let ingestErrors = 0;
  let sending = true;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();

  const send = () => {
    const i = sent++;
    const seq = o.firstSeq + i;
    const subject = ingestSubject(o.orgId, 'workflows', workflowId(seq));
    const data = encoder.encode(factFor(seq));
    const t = performance.now();
    sentAt[i] = t;
    nc.request(subject, data, { timeout: 30_000 }).then(
      (m) => {
        ackMs[acked++] = performance.now() - t;
        const reply = JSON.parse(decoder.decode(m.data)) as { ok: boolean };
        if (!reply.ok) ingestErrors++;
      },
      () => {
        ingestErrors++;
      },
    );
  };

  const window = o.ratePerSec ? null : Math.max(1, o.window ?? 1);
  const pump = () => {
    if (!sending || window === null) return;
    while (sent < o.events && sent - complete < window) send();
  };

  receiver.stray = 0;
  receiver.sink = {
    record(seq, at, len) {
      const i = seq - o.firstSeq;
      if (i < 0 || i >= o.events) {
        receiver.stray++;
        return;
      }
      if (got[i] >= n) {
        duplicates++;
        return;
      }
      got[i]++;
      lat[deliveries] = at - sentAt[i];
      receivedAt[deliveries] = at;
      deliveries++;
      bytes += len;
      if (got[i] === n) {
        complete++;
        if (complete === o.events) done();
        else pump();
      }
    },
  };

  const cpu0 = cpuSnapshot(o.cpuPids ?? {});
  const t0 = performance.now();
  const limit = setTimeout(() => {
    sending = false;
    done();
  }, o.timeLimitMs);
  let pacer: NodeJS.Timeout | null = null;
  if (o.ratePerSec) {
    const rate = o.ratePerSec;
    pacer = setInterval(() => {
      const due = Math.min(o.events, Math.floor(((performance.now() - t0) / 1000) * rate) + 1);
      while (sending && sent < due) send();
      if (sent >= o.events && pacer) clearInterval(pacer);
    }, 1);
  } else {
    pump();
  }
  await finished;
  clearTimeout(limit);
  if (pacer) clearInterval(pacer);
  const timedOut = complete < o.events;
  if (timedOut) {
    // let what is in flight arrive, bounded
    const until = performance.now() + o.drainMs;
    while (complete < sent && performance.now() < until) await new Promise((r) => setTimeout(r, 50));
  }
  receiver.sink = null;
  const cpu1 = cpuSnapshot(o.cpuPids ?? {});
  const cpuMs: Record<string, number | null> = {};
  const cpuPerDelivery: Record<string, number | null> = {};
  for (const k of Object.keys(cpu1)) {
    const a = cpu0[k];
    const b = cpu1[k];
    cpuMs[k] = a !== null && b !== null ? Math.round(b - a) : null;
    cpuPerDelivery[k] = cpuMs[k] !== null && deliveries ? Math.round(((cpuMs[k] as number) * 1000) / deliveries) : null;
  }

  const last = deliveries ? receivedAt[deliveries - 1] : t0;
  const lastSent = sent ? sentAt[sent - 1] : t0;
  const tailMs = Math.max(0, last - lastSent);
  const first = sent ? sentAt[0] : t0;
  const durationMs = Math.max(1e-3, last - first);
  let steady = NaN;
  if (deliveries >= 100) {
    const a = Math.floor(deliveries * 0.1);
    const b = Math.floor(deliveries * 0.9);
    const span = receivedAt[b] - receivedAt[a];
    steady = span > 0 ? ((b - a) / span) * 1000 : NaN;
  }
  const round = (v: number) => Math.round(v);
  return {
    name: o.name,
    mode: o.ratePerSec ? 'paced' : 'closed',
    fanout: n,
    window,
    rate_events_per_sec: o.ratePerSec ?? null,
    offered_deliveries_per_sec: o.ratePerSec ? Math.round(o.ratePerSec * n) : null,
    events_planned: o.events,
    events_sent: sent,
    events_complete: complete,
    deliveries_expected: sent * n,
    deliveries,
    duplicates,
    missing: sent * n - deliveries,
    ingest_errors: ingestErrors,
    timed_out: timedOut,
    duration_ms: round(durationMs),
    tail_ms: round(tailMs),
    kept_up: o.ratePerSec ? sent === o.events && deliveries === sent * n && tailMs <= KEPT_UP_TAIL_MS : null,
    deliveries_per_sec: round((deliveries / durationMs) * 1000),
    steady_deliveries_per_sec: round(steady),
    events_per_sec: round((complete / durationMs) * 1000),
    body_bytes_mean: deliveries ? round(bytes / deliveries) : 0,
    latency_ms: percentiles(lat.subarray(0, deliveries)),
    ack_ms: percentiles(ackMs.subarray(0, acked)),
    cpu_ms: cpuMs,
    cpu_us_per_delivery: cpuPerDelivery,
  };
}

// ------------------------------------------------------------------------------- ingest alone

export interface IngestOptions {
  name: string;
  orgId: string;
  /** facts to send; seqs firstSeq .. firstSeq + facts - 1 */
  facts: number;
  firstSeq: number;
  /** requests outstanding at most (closed loop) */
  window: number;
  /** stop sending after this long */
  timeLimitMs: number;
  cpuPids?: CpuPids;
}

export interface IngestResult {
  name: string;
  window: number;
  facts_planned: number;
  facts_sent: number;
  /** answered {ok: true}: committed */
  facts_acked: number;
  errors: number;
  timed_out: boolean;
  /** first send → last answer */
  duration_ms: number;
  facts_per_sec: number;
  /** the same rate between the 10th and the 90th percentile of answers */
  steady_facts_per_sec: number;
  /** send → answer, per fact */
  ack_ms: Percentiles;
  cpu_ms: Record<string, number | null>;
  cpu_us_per_fact: Record<string, number | null>;
}

/**
 * Ingest alone: the producer keeps `window` requests outstanding (each a distinct external workflow
 * fact) until `facts` are answered; the rate is answered facts per second. Nothing is delivered.
 */
export async function runIngestPhase(server: NatsConnection, o: IngestOptions): Promise<IngestResult> {
  const nc = await producerOf(server, o.orgId);
  const ackAt = new Float64Array(o.facts);
  const ackMs = new Float64Array(o.facts);
  let sent = 0;
  let answered = 0;
  let acked = 0;
  let errors = 0;
  let sending = true;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  const window = Math.max(1, o.window);

  const pump = () => {
    while (sending && sent < o.facts && sent - answered < window) send();
  };
  const send = () => {
    const seq = o.firstSeq + sent++;
    const t = performance.now();
    nc.request(ingestSubject(o.orgId, 'workflows', workflowId(seq)), encoder.encode(factFor(seq)), { timeout: 30_000 }).then(
      (m) => {
        const now = performance.now();
        const reply = JSON.parse(decoder.decode(m.data)) as { ok: boolean };
        if (reply.ok) {
          ackAt[acked] = now;
          ackMs[acked++] = now - t;
        } else errors++;
        answer();
      },
      () => {
        errors++;
        answer();
      },
    );
  };
  const answer = () => {
    answered++;
    if (answered === o.facts || (!sending && answered === sent)) done();
    else pump();
  };

  const cpu0 = cpuSnapshot(o.cpuPids ?? {});
  const t0 = performance.now();
  const limit = setTimeout(() => {
    sending = false;
    if (answered === sent) done();
  }, o.timeLimitMs);
  pump();
  await finished;
  clearTimeout(limit);
  const cpu1 = cpuSnapshot(o.cpuPids ?? {});
  const cpuMs: Record<string, number | null> = {};
  const perFact: Record<string, number | null> = {};
  for (const k of Object.keys(cpu1)) {
    const a = cpu0[k];
    const b = cpu1[k];
    cpuMs[k] = a !== null && b !== null ? Math.round(b - a) : null;
    perFact[k] = cpuMs[k] !== null && acked ? Math.round(((cpuMs[k] as number) * 1000) / acked) : null;
  }
  const sorted = Float64Array.from(ackAt.subarray(0, acked)).sort();
  const durationMs = Math.max(1e-3, (acked ? sorted[acked - 1] : t0) - t0);
  let steady = NaN;
  if (acked >= 100) {
    const a = Math.floor(acked * 0.1);
    const b = Math.floor(acked * 0.9);
    const span = sorted[b] - sorted[a];
    steady = span > 0 ? ((b - a) / span) * 1000 : NaN;
  }
  return {
    name: o.name,
    window,
    facts_planned: o.facts,
    facts_sent: sent,
    facts_acked: acked,
    errors,
    timed_out: sent < o.facts,
    duration_ms: Math.round(durationMs),
    facts_per_sec: Math.round((acked / durationMs) * 1000),
    steady_facts_per_sec: Math.round(steady),
    ack_ms: percentiles(ackMs.subarray(0, acked)),
    cpu_ms: cpuMs,
    cpu_us_per_fact: perFact,
  };
}
