// `npm run bench`: svc against a bare NATS → undici baseline, webhook fan-out to 10 and 100 hooks,
// and the other scenarios of issue 10 (bench/scenarios.ts: workers scale-out, burst, ingest alone).
//
//   private nats-server (JetStream, temp dir, free port)
//   producer (this process) ── NATS requests svc.ingest.<org>.workflows.bwf_<seq> ──▶ system under test
//   system under test (a child process) ── HTTP POST × fan-out ──▶ receiver (this process, 204 at once)
//
// The system under test is the baseline (bench/baseline.ts) or svc (`bin/svc.mjs serve --nats …`,
// its delivery threads included), each alone and in its own process, so that neither shares an
// event loop with the producer and the receiver. They alternate over several rounds (baseline, svc,
// baseline, svc, …): each svc figure is compared with the baseline of its own round and the report
// gives the median over rounds, so that other load on the machine does not skew one side only. For
// each fan-out: a warm-up, a saturated closed-loop phase (throughput; latency under load, mostly
// queueing) and a paced open-loop phase at a fixed offered load (latency when not overloaded).
// Results: a table on stdout, JSON in bench/results/latest.json.
//
// Environment knobs (BENCHMARKS.md has them all): BENCH_SCENARIOS (default
// throughput,paced,workers,burst,ingest,tenancy; also history, which only runs when named),
// BENCH_ROUNDS (default 3; also the history scenario's rounds), BENCH_FANOUTS (default 10,100),
// BENCH_SCALE (multiplies the saturated phase's fact counts), BENCH_PACED_RATE (deliveries/s offered
// in the paced phase: one number for every fan-out, or fanout:rate pairs; default 10:10000, else
// 2000), BENCH_PACED_SECONDS, BENCH_SVC_NODE_ARGS (node flags for every svc process, e.g.
// "--cpu-prof --cpu-prof-dir=/tmp/prof"), BENCH_ONLY=svc|baseline, and the sizes of the other
// scenarios (BENCH_WORKERS_*, BENCH_BURST_*, BENCH_INGEST_*, BENCH_TENANCY_*, BENCH_HISTORY_*,
// BENCH_RECOVERY_EVENTS, BENCH_RECOVERY_MISSED).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { findNatsServer } from '../test/helpers/nats-server.ts';
import { openDb } from '../store/db.ts';
import { createOrg } from '../store/orgs.ts';
import { closeProducers, KEPT_UP_TAIL_MS, runPhase, startBenchReceiver, type BenchReceiver, type CpuPids, type PhaseResult } from './harness.ts';
import { createWebhooks, log, ROOT, sleep, spawnChild, startNats, startSvcServe, stopChild, svcCounters, warnings } from './procs.ts';
import {
  runBurstScenario,
  runHistoryScenario,
  runIngestScenario,
  runTenancyScenario,
  runWorkersScenario,
  SIZES,
  type BurstResult,
  type HistoryResult,
  type IngestScenarioResult,
  type ScenarioEnv,
  type TenancyResult,
  type WorkersResult,
} from './scenarios.ts';

const RESULTS = path.join(ROOT, 'bench', 'results');
const SCALE = Number(process.env.BENCH_SCALE ?? '1') || 1;
const ONLY = process.env.BENCH_ONLY ?? '';
/** BENCH_KEEP_LOGS=1: keep the work directory (svc logs, databases) after a successful run too. */
const KEEP_LOGS = /^(1|true|yes|on)$/i.test(process.env.BENCH_KEEP_LOGS ?? '');
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? '3') || 3);

const ALL_SCENARIOS = ['throughput', 'paced', 'workers', 'burst', 'ingest', 'tenancy', 'history'] as const;
/** What runs when BENCH_SCENARIOS is not set: all but `history` (3–6 min on its own; BENCH_SCENARIOS=history). */
const DEFAULT_SCENARIOS = ALL_SCENARIOS.filter((s) => s !== 'history');
type Scenario = (typeof ALL_SCENARIOS)[number];
const SCENARIOS: Set<Scenario> = (() => {
  const raw = (process.env.BENCH_SCENARIOS ?? '').trim();
  if (!raw) return new Set(DEFAULT_SCENARIOS);
  const names = raw.split(',').map((x) => x.trim()).filter(Boolean);
  const unknown = names.filter((n) => !(ALL_SCENARIOS as readonly string[]).includes(n));
  if (unknown.length) throw new Error(`BENCH_SCENARIOS: unknown ${unknown.join(', ')} (known: ${ALL_SCENARIOS.join(', ')})`);
  return new Set(names as Scenario[]);
})();
const COMPARE = SCENARIOS.has('throughput') || SCENARIOS.has('paced');

/** Deliveries in flight at most per closed-loop phase: enough to keep every hook's 8 slots busy. */
const WINDOW_DELIVERIES = 2000;

/**
 * Deliveries/s offered in the paced phase of each fan-out. Issue 10's target is 1 000 facts/s × 10
 * webhooks with a p99 ≤ 10 ms, so x10 is paced at 10 000 deliveries/s; other fan-outs at 2 000.
 * BENCH_PACED_RATE=N sets every fan-out; BENCH_PACED_RATE=10:10000,100:2000 sets them one by one.
 */
const PACED_DEFAULT: Record<number, number> = { 10: 10_000 };
const PACED_FALLBACK = 2000;
const pacedRateFor: (fanout: number) => number = (() => {
  const raw = (process.env.BENCH_PACED_RATE ?? '').trim();
  if (/^\d+(\.\d+)?$/.test(raw) && Number(raw) > 0) return () => Number(raw);
  const map: Record<number, number> = raw ? {} : { ...PACED_DEFAULT };
  for (const pair of raw.split(',').filter(Boolean)) {
    const m = /^\s*(\d+)\s*:\s*(\d+(?:\.\d+)?)\s*$/.exec(pair);
    if (!m || Number(m[2]) <= 0) throw new Error(`BENCH_PACED_RATE: "${pair}" is not <deliveries/s> or <fanout>:<deliveries/s>`);
    map[Number(m[1])] = Number(m[2]);
  }
  return (fanout) => map[fanout] ?? PACED_FALLBACK;
})();
/**
 * The paced phase lasts long enough for at least MIN_PACED_FACTS facts and at least 3 s (at most
 * 10 s), unless BENCH_PACED_SECONDS says otherwise: at 1 000 facts/s × 10, 3 s = 30 000
 * deliveries (the p99 is the 300th slowest); at 20 facts/s × 100, 5 s = 100 facts, 10 000 deliveries.
 */
const MIN_PACED_FACTS = 100;
const PACED_SECONDS_KNOB = Number(process.env.BENCH_PACED_SECONDS ?? '') || null;
const pacedSecondsFor = (factsPerSec: number) => PACED_SECONDS_KNOB ?? Math.min(10, Math.max(3, MIN_PACED_FACTS / factsPerSec));

interface CaseSpec {
  fanout: number;
  warmupEvents: number;
  events: number;
  /** deliveries/s offered in the paced phase */
  pacedDeliveriesPerSec: number;
  pacedSeconds: number;
}

/** Each case: 25 000 deliveries measured (3 000 in the warm-up), e.g. 2 500 facts × 10 hooks. */
const CASES: CaseSpec[] = (process.env.BENCH_FANOUTS ?? '10,100')
  .split(',')
  .map((x) => Number(x))
  .filter((f) => Number.isInteger(f) && f > 0)
  .map((fanout) => {
    const paced = pacedRateFor(fanout);
    return {
      fanout,
      warmupEvents: Math.ceil(3000 / fanout),
      events: Math.max(1, Math.round((Math.min(5000 * fanout, 25_000) / fanout) * SCALE)),
      pacedDeliveriesPerSec: paced,
      pacedSeconds: Math.round(pacedSecondsFor(paced / fanout) * 10) / 10,
    };
  });
const PHASE_LIMIT_MS = 25_000;
const DRAIN_MS = 10_000;

type System = 'baseline' | 'svc';

interface CaseResult {
  fanout: number;
  /** null when the throughput scenario is not selected */
  saturated: PhaseResult | null;
  /** null when the paced scenario is not selected */
  paced: PhaseResult | null;
}

interface SystemRun {
  cases: CaseResult[];
  notes: Record<string, unknown>;
}

let nextSeq = 1;
function takeSeqs(n: number): number {
  const first = nextSeq;
  nextSeq += n;
  return first;
}

/** Warm-up, saturated and paced phases of every case against whatever answers the ingest subjects now. */
async function runCases(system: System, nc: NatsConnection, receiver: BenchReceiver, orgOf: (fanout: number) => string, cpuPids: CpuPids): Promise<CaseResult[]> {
  const out: CaseResult[] = [];
  for (const c of CASES) {
    const orgId = orgOf(c.fanout);
    const window = Math.max(1, Math.floor(WINDOW_DELIVERIES / c.fanout));
    const common = { orgId, fanout: c.fanout, timeLimitMs: PHASE_LIMIT_MS, drainMs: DRAIN_MS, cpuPids };
    const warm = await runPhase(nc, receiver, { ...common, name: `${system} warm-up x${c.fanout}`, events: c.warmupEvents, firstSeq: takeSeqs(c.warmupEvents), window });
    log(`${system} x${c.fanout} warm-up: ${warm.deliveries}/${warm.deliveries_expected} deliveries, ${warm.deliveries_per_sec}/s`);
    await sleep(300);
    let saturated: PhaseResult | null = null;
    if (SCENARIOS.has('throughput')) {
      saturated = await runPhase(nc, receiver, { ...common, name: `${system} saturated x${c.fanout}`, events: c.events, firstSeq: takeSeqs(c.events), window });
      log(
        `${system} x${c.fanout} saturated: ${saturated.deliveries}/${saturated.deliveries_expected} deliveries in ${saturated.duration_ms} ms = ` +
          `${saturated.deliveries_per_sec}/s; latency p50 ${saturated.latency_ms.p50} p99 ${saturated.latency_ms.p99} ms`,
      );
      await sleep(300);
    }
    let paced: PhaseResult | null = null;
    if (SCENARIOS.has('paced')) {
      const rate = c.pacedDeliveriesPerSec / c.fanout;
      const pacedEvents = Math.max(10, Math.round(rate * c.pacedSeconds));
      paced = await runPhase(nc, receiver, { ...common, name: `${system} paced x${c.fanout}`, events: pacedEvents, firstSeq: takeSeqs(pacedEvents), ratePerSec: rate });
      log(
        `${system} x${c.fanout} paced at ${Math.round(rate)} facts/s for ${c.pacedSeconds} s: ${paced.deliveries}/${paced.deliveries_expected} deliveries; ` +
          `latency p50 ${paced.latency_ms.p50} p99 ${paced.latency_ms.p99} ms${paced.kept_up ? '' : `; DID NOT KEEP UP (last delivery ${paced.tail_ms} ms after the last send)`}`,
      );
      await sleep(300);
    }
    out.push({ fanout: c.fanout, saturated, paced });
  }
  return out;
}

function hookUrls(receiver: BenchReceiver, fanout: number): string[] {
  return Array.from({ length: fanout }, (_, i) => `${receiver.url}/h/${fanout}/${i}`);
}

async function runBaseline(env: Env, round: number): Promise<SystemRun> {
  const targets: Record<string, string[]> = {};
  for (const [fanout, org] of env.orgs) targets[org.org_id] = hookUrls(env.receiver, fanout);
  const { child } = await spawnChild(
    'baseline',
    ['--import', 'tsx', 'bench/baseline.ts'],
    { BENCH_NATS_URL: env.natsUrl, BENCH_TARGETS: JSON.stringify(targets) },
    (l) => l.trim() === 'ready',
    path.join(env.tmp, `baseline-${round}.log`),
  );
  try {
    const loadavg = os.loadavg()[0];
    const cpuPids = { sut: child.pid ?? null, nats: env.natsPid };
    const cases = await runCases('baseline', env.nc, env.receiver, (f) => env.orgs.get(f)!.org_id, cpuPids);
    return { cases, notes: { loadavg_1m_at_start: Math.round(loadavg * 100) / 100 } };
  } finally {
    await stopChild(child);
  }
}

/** svc serve --nats (delivery threads: svc's default); its pid's CPU time includes every thread. */
async function runSvc(env: Env, round: number): Promise<SystemRun> {
  const svc = await startSvcServe({ natsUrl: env.natsUrl, db: env.db, logFile: path.join(env.tmp, `svc-${round}.log`) });
  try {
    if (round === 1) {
      // webhooks over the HTTP API: all_events, signed (a secret), one URL each on the one receiver;
      // they stay in svc's database for the later rounds
      for (const [fanout, org] of env.orgs) await createWebhooks(svc.url, org, hookUrls(env.receiver, fanout));
    }
    const loadavg = os.loadavg()[0];
    const delivery = /"delivery":"([^"]*)"/.exec(svc.line)?.[1] ?? null;
    const cpuPids = { sut: svc.pid, nats: env.natsPid };
    const cases = await runCases('svc', env.nc, env.receiver, (f) => env.orgs.get(f)!.org_id, cpuPids);
    const counters = await svcCounters(svc.url);
    const notes = {
      loadavg_1m_at_start: Math.round(loadavg * 100) / 100,
      delivery,
      ...counters,
      log_warnings: warnings(svc.lines).length,
    };
    return { cases, notes };
  } finally {
    await stopChild(svc.child);
    const w = warnings(svc.lines);
    if (w.length) log(`svc logged ${w.length} warnings/errors, e.g. ${w[0].slice(0, 300)}`);
  }
}

interface Env {
  natsUrl: string;
  nc: NatsConnection;
  receiver: BenchReceiver;
  orgs: Map<number, { org_id: string; api_token: string }>;
  db: string;
  tmp: string;
  natsPid: number | null;
}

function machine(): Record<string, unknown> {
  const cpus = os.cpus();
  let commit = 'unknown';
  let dirty: string[] = [];
  try {
    const quiet = { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] as ['ignore', 'pipe', 'ignore'] };
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], quiet).toString().trim();
    dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'store', 'machines'], quiet)
      .toString()
      .split('\n')
      .filter(Boolean)
      .map((l) => l.slice(3));
  } catch {
    /* not a git checkout */
  }
  let nats = 'unknown';
  try {
    nats = execFileSync(findNatsServer() ?? 'nats-server', ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
  } catch {
    /* found elsewhere by the helper */
  }
  return {
    cpus: cpus.length,
    cpu_model: cpus[0]?.model ?? 'unknown',
    memory_gb: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    nats_server: nats,
    git_commit: commit,
    uncommitted_service_files: dirty,
  };
}

const ratio = (a: number | null | undefined, b: number | null | undefined) =>
  a !== null && a !== undefined && b !== null && b !== undefined && b > 0 && Number.isFinite(a) ? Math.round((a / b) * 1000) / 1000 : null;

function median(values: Array<number | null | undefined>): number | null {
  const v = values.filter((x): x is number => x !== null && x !== undefined && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  return Math.round(m * 1000) / 1000;
}

type Ratios = ReturnType<typeof ratiosOf>;

function ratiosOf(svc: CaseResult, base: CaseResult) {
  return {
    fanout: svc.fanout,
    throughput: ratio(svc.saturated?.deliveries_per_sec, base.saturated?.deliveries_per_sec),
    steady_throughput: ratio(svc.saturated?.steady_deliveries_per_sec, base.saturated?.steady_deliveries_per_sec),
    saturated_latency_p50: ratio(svc.saturated?.latency_ms.p50, base.saturated?.latency_ms.p50),
    saturated_latency_p99: ratio(svc.saturated?.latency_ms.p99, base.saturated?.latency_ms.p99),
    paced_latency_p50: ratio(svc.paced?.latency_ms.p50, base.paced?.latency_ms.p50),
    paced_latency_p99: ratio(svc.paced?.latency_ms.p99, base.paced?.latency_ms.p99),
    sut_cpu_per_delivery: ratio(svc.saturated?.cpu_us_per_delivery.sut, base.saturated?.cpu_us_per_delivery.sut),
  };
}

/** Per fan-out and system: the median over rounds of each headline figure. */
function summarise(runs: Array<Partial<Record<System, SystemRun>>>) {
  const out: Record<string, Record<string, Record<string, number | null>>> = {};
  for (const c of CASES) {
    const per: Record<string, Record<string, number | null>> = {};
    for (const sys of ['baseline', 'svc'] as System[]) {
      const rs = runs.map((r) => r[sys]?.cases.find((x) => x.fanout === c.fanout)).filter((x): x is CaseResult => !!x);
      if (!rs.length) continue;
      per[sys] = {
        deliveries_per_sec: median(rs.map((r) => r.saturated?.deliveries_per_sec)),
        steady_deliveries_per_sec: median(rs.map((r) => r.saturated?.steady_deliveries_per_sec)),
        saturated_p50_ms: median(rs.map((r) => r.saturated?.latency_ms.p50)),
        saturated_p99_ms: median(rs.map((r) => r.saturated?.latency_ms.p99)),
        paced_facts_per_sec: median(rs.map((r) => r.paced?.rate_events_per_sec)),
        paced_deliveries_per_sec: median(rs.map((r) => r.paced?.offered_deliveries_per_sec)),
        paced_p50_ms: median(rs.map((r) => r.paced?.latency_ms.p50)),
        paced_p99_ms: median(rs.map((r) => r.paced?.latency_ms.p99)),
        /** rounds whose paced phase kept up with the offered load */
        paced_kept_up_rounds: rs.filter((r) => r.paced?.kept_up).length,
        paced_rounds: rs.filter((r) => r.paced).length,
        sut_cpu_us_per_delivery: median(rs.map((r) => r.saturated?.cpu_us_per_delivery.sut)),
        nats_cpu_us_per_delivery: median(rs.map((r) => r.saturated?.cpu_us_per_delivery.nats)),
        bench_cpu_us_per_delivery: median(rs.map((r) => r.saturated?.cpu_us_per_delivery.bench)),
        missing: rs.reduce((n, r) => n + (r.saturated?.missing ?? 0) + (r.paced?.missing ?? 0), 0),
        duplicates: rs.reduce((n, r) => n + (r.saturated?.duplicates ?? 0) + (r.paced?.duplicates ?? 0), 0),
      };
    }
    out[`x${c.fanout}`] = per;
  }
  return out;
}

/** Per fan-out: the lowest and highest per-round ratio of each figure. */
function ratioRanges(perRound: Ratios[][]): Array<{ fanout: number } & Record<string, [number, number] | null | number>> {
  return CASES.map((c) => {
    const rs = perRound.map((r) => r.find((x) => x.fanout === c.fanout)).filter((x): x is Ratios => !!x);
    const range: Record<string, [number, number] | null> = {};
    for (const k of Object.keys(rs[0] ?? {}) as Array<keyof Ratios>) {
      if (k === 'fanout') continue;
      const v = rs.map((r) => r[k]).filter((x): x is number => typeof x === 'number');
      range[k] = v.length ? [Math.min(...v), Math.max(...v)] : null;
    }
    return { fanout: c.fanout, ...range };
  });
}

function medianRatios(perRound: Ratios[][]): Ratios[] {
  return CASES.map((c) => {
    const rs = perRound.map((r) => r.find((x) => x.fanout === c.fanout)).filter((x): x is Ratios => !!x);
    const m = (k: keyof Ratios) => median(rs.map((r) => r[k] as number | null));
    return {
      fanout: c.fanout,
      throughput: m('throughput'),
      steady_throughput: m('steady_throughput'),
      saturated_latency_p50: m('saturated_latency_p50'),
      saturated_latency_p99: m('saturated_latency_p99'),
      paced_latency_p50: m('paced_latency_p50'),
      paced_latency_p99: m('paced_latency_p99'),
      sut_cpu_per_delivery: m('sut_cpu_per_delivery'),
    };
  });
}

const fmt = (v: number | null | undefined) => (v === null || v === undefined || !Number.isFinite(v) ? '-' : String(Math.round(v * 100) / 100));
const times = (v: number | null | undefined) => (v === null || v === undefined ? '-' : `${Math.round(v * 100) / 100}x`);

function grid(rows: string[][], leftColumns = 2): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((cell, i) => (i < leftColumns ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  ')).join('\n');
}

function table(summary: ReturnType<typeof summarise>, ratios: Ratios[]): string {
  const rows: string[][] = [
    ['fan-out', 'system', 'del/s', 'steady del/s', 'sat p50 ms', 'sat p99 ms', 'paced del/s', 'paced p50 ms', 'paced p99 ms', 'kept up', 'cpu µs/del', 'nats µs/del', 'missing'],
  ];
  for (const c of CASES) {
    const per = summary[`x${c.fanout}`] ?? {};
    for (const sys of ['baseline', 'svc'] as System[]) {
      const s = per[sys];
      if (!s) continue;
      rows.push([
        String(c.fanout),
        sys,
        fmt(s.deliveries_per_sec),
        fmt(s.steady_deliveries_per_sec),
        fmt(s.saturated_p50_ms),
        fmt(s.saturated_p99_ms),
        fmt(s.paced_deliveries_per_sec),
        fmt(s.paced_p50_ms),
        fmt(s.paced_p99_ms),
        s.paced_rounds ? `${s.paced_kept_up_rounds}/${s.paced_rounds}` : '-',
        fmt(s.sut_cpu_us_per_delivery),
        fmt(s.nats_cpu_us_per_delivery),
        String(s.missing),
      ]);
    }
    const r = ratios.find((x) => x.fanout === c.fanout);
    if (r) {
      rows.push([String(c.fanout), 'svc/baseline', times(r.throughput), times(r.steady_throughput), times(r.saturated_latency_p50), times(r.saturated_latency_p99), '', times(r.paced_latency_p50), times(r.paced_latency_p99), '', times(r.sut_cpu_per_delivery), '', '']);
    }
  }
  return grid(rows);
}

function scenarioTables(s: { workers?: WorkersResult | null; burst?: BurstResult | null; ingest?: IngestScenarioResult | null; tenancy?: TenancyResult | null; history?: HistoryResult | null }): string {
  const out: string[] = [];
  if (s.workers) {
    const w = s.workers;
    const rows = [['workers', 'del/s', 'bound del/s', 'of bound', 'backlog after', 'engine µs/del', 'workers µs/del', 'nats µs/del']];
    for (const r of w.runs) {
      const workersCpu = Object.entries(r.cpu_us_per_delivery)
        .filter(([k]) => k.startsWith('worker'))
        .reduce((n, [, v]) => n + (v ?? 0), 0);
      rows.push([String(r.workers), fmt(r.deliveries_per_sec), fmt(r.bound_deliveries_per_sec), `${Math.round(r.of_bound * 100)} %`, String(r.backlog_events_after), fmt(r.cpu_us_per_delivery.engine), fmt(workersCpu), fmt(r.cpu_us_per_delivery.nats)]);
    }
    out.push(
      `workers: svc serve --no-deliver + svc worker × 1, 2; ${w.config.webhooks} webhooks (fan-out ${w.config.fanout}), --delivery-concurrency ${w.config.concurrency}, receiver answers after ${w.config.delay_ms} ms\n` +
        `${grid(rows, 1)}\nscale-out two/one: ${times(w.scale_ratio)} (target ≥ 1.7x)`,
    );
  }
  if (s.burst) {
    const b = s.burst;
    out.push(
      `burst: ${b.config.events} events × ${b.config.webhooks} webhooks (one org) = ${b.deliveries_expected} deliveries, svc serve, delivery: ${b.delivery ?? '?'}\n` +
        `  duration (first send → last receipt) ${b.burst.duration_ms} ms = ${b.burst.deliveries_per_sec} deliveries/s; latency p50 ${b.burst.latency_ms.p50} p99 ${b.burst.latency_ms.p99} ms\n` +
        `  failures: receiver ${b.receiver_failures} (missing ${b.burst.missing}, duplicates ${b.burst.duplicates}), svc_deliveries_total{outcome="failure"} +${b.svc_failures} (success +${b.svc_successes})\n` +
        `  svc serve RSS: ${b.rss.start_mib} MiB before, peak ${b.rss.peak_mib} MiB (${b.rss.samples} samples), ${b.rss.end_mib} MiB at the end; VmHWM ${b.rss.hwm_mib} MiB; ` +
        `CPU ${b.burst.cpu_us_per_delivery.sut} µs/delivery; ${b.config.webhooks} webhooks created in ${b.webhooks_create_ms} ms`,
    );
  }
  if (s.ingest) {
    const g = s.ingest;
    const rows = [['round', 'baseline facts/s', 'svc facts/s', 'svc/baseline', 'svc ack p50 ms', 'svc ack p99 ms', 'svc µs/fact', 'nats µs/fact', 'svc errors']];
    g.rounds.forEach((r, i) =>
      rows.push([String(i + 1), fmt(r.baseline.facts_per_sec), fmt(r.svc.facts_per_sec), times(r.ratio), fmt(r.svc.ack_ms.p50), fmt(r.svc.ack_ms.p99), fmt(r.svc.cpu_us_per_fact.sut), fmt(r.svc.cpu_us_per_fact.nats), String(r.svc.errors)]),
    );
    rows.push(['median', fmt(g.median.baseline_facts_per_sec), fmt(g.median.svc_facts_per_sec), times(g.median.ratio), '', '', '', '', '']);
    out.push(`ingest alone: ${g.config.facts} facts per measurement, ${g.config.window} requests outstanding, svc serve --no-deliver, no webhooks (target ≥ 20 000 facts/s)\n${grid(rows, 1)}`);
  }
  if (s.tenancy) {
    const t = s.tenancy;
    const rows = [['org B', 'deliveries', 'p50 ms', 'p99 ms', 'max ms']];
    for (const [name, p] of [['alone', t.alone], ['beside A', t.beside]] as const) rows.push([name, `${p.deliveries}/${p.deliveries_expected}`, fmt(p.latency_ms.p50), fmt(p.latency_ms.p99), fmt(p.latency_ms.max)]);
    rows.push(['beside/alone', '', times(t.ratio.p50), times(t.ratio.p99), times(t.ratio.max)]);
    out.push(
      `tenancy: org B ${t.config.rate} facts/s × ${t.config.webhooks} webhooks for ${t.config.seconds} s, alone and beside org A's ${t.config.tarpit_webhooks} webhooks that never answer ` +
        `(${t.tarpit_attempts} of A's attempts held meanwhile); B's slowest delivery ${t.added_max_ms} ms later beside A (target ≤ 1 000 ms)\n${grid(rows, 1)}`,
    );
  }
  if (s.history) {
    const h = s.history;
    const rows = [['round', 'order', 'ret. 0 facts/s', 'ret. 0 del/s', '7d facts/s', '7d del/s', '7d/0 facts/s', '7d/0 del/s', '7d/0 cpu/del', 'missing']];
    h.rounds.forEach((r, i) =>
      rows.push([
        String(i + 1),
        r.order.map((o) => (o === 'none' ? '0' : '7d')).join(','),
        fmt(r.none.events_per_sec),
        fmt(r.none.deliveries_per_sec),
        fmt(r.kept.events_per_sec),
        fmt(r.kept.deliveries_per_sec),
        times(r.ratio.facts_per_sec),
        times(r.ratio.deliveries_per_sec),
        times(r.ratio.sut_cpu_per_delivery),
        String(r.none.missing + r.kept.missing),
      ]),
    );
    const m = h.median;
    rows.push(['median', '', fmt(m.none_facts_per_sec), fmt(m.none_deliveries_per_sec), fmt(m.kept_facts_per_sec), fmt(m.kept_deliveries_per_sec), times(m.ratio_facts_per_sec), times(m.ratio_deliveries_per_sec), times(m.ratio_sut_cpu_per_delivery), '']);
    let text =
      `history: ${h.config.facts} facts × ${h.config.fanout} webhooks per measurement, svc serve --event-retention 0 and with the default 7d, interleaved; ` +
      `GET /v1/events listed ${h.events_listed.none ?? '?'} (retention 0) and ${h.events_listed.kept ?? '?'} (7d) with limit=1\n${grid(rows, 2)}`;
    const r = h.recovery;
    if (r) {
      const rec = [
        ['recovery', 'events', 'request → 202 ms', 'request → all received ms', 'events/s', '202 → all received ms', 'events/s after 202', 'request → done ms', 'duplicates', 'no header', 'svc µs/event'],
        [
          `${r.recovery_events}/${r.events}`,
          String(r.received),
          fmt(r.request_ms),
          fmt(r.received_ms),
          fmt(r.events_per_sec),
          fmt(r.received_ms_after_202),
          fmt(r.events_per_sec_after_202),
          fmt(r.done_ms),
          String(r.duplicates),
          String(r.without_header),
          fmt(r.cpu_us_per_event.sut),
        ],
      ];
      text +=
        `\nrecovery: ${r.events} events missed by one webhook (` +
        (r.missed === 'failing'
          ? `receiver 503: ${r.emit.failed_attempts} failed attempts in ${r.emit.duration_ms} ms, ${r.emit.attempts_per_sec}/s; `
          : 'emitted before the webhook existed; ') +
        `facts committed at ${r.emit.ingest.facts_per_sec}/s), then recovered to it answering 200; svc serve RSS peak ${r.rss.peak_mib ?? '-'} MiB\n${grid(rec, 1)}`;
    } else if (h.recovery_error) {
      text += `\nrecovery: failed (${h.recovery_error.split('\n')[0]})`;
    }
    out.push(text);
  }
  return out.join('\n\n');
}

async function main(): Promise<void> {
  const started = Date.now();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
  const nats = await startNats();
  const receiver = await startBenchReceiver();
  // noAsyncTraces: no stack captured per request, which halves the producer's CPU per request
  const nc = await connect({ servers: nats.url, name: 'bench-producer', noAsyncTraces: true });
  const loadStart = os.loadavg().map((x) => Math.round(x * 100) / 100);
  log(`nats ${nats.url}, receiver ${receiver.url}, work dir ${tmp}; scenarios ${[...SCENARIOS].join(',')}; ${COMPARE ? `${ROUNDS} rounds; ` : ''}load average ${loadStart.join(' ')}`);

  // the orgs (one per fan-out) exist in svc's database before it starts; the baseline uses the same ids
  const db = path.join(tmp, 'svc.db');
  const orgs = new Map<number, { org_id: string; api_token: string }>();
  const handle = openDb(db);
  for (const c of CASES) {
    const { org, api_token } = createOrg(handle, `bench-x${c.fanout}`);
    orgs.set(c.fanout, { org_id: org.org_id, api_token });
  }
  handle.close();
  const env: Env = { natsUrl: nats.url, nc, receiver, orgs, db, tmp, natsPid: nats.pid };
  const scenarioEnv: ScenarioEnv = { tmp, receiver, natsUrl: nats.url, natsPid: nats.pid, nc, takeSeqs };

  const rounds: Array<Partial<Record<System, SystemRun>>> = [];
  let workers: WorkersResult | null = null;
  let burst: BurstResult | null = null;
  let ingest: IngestScenarioResult | null = null;
  let tenancy: TenancyResult | null = null;
  let history: HistoryResult | null = null;
  const errors: string[] = [];
  const attempt = async <T>(name: string, fn: () => Promise<T>): Promise<T | null> => {
    try {
      return await fn();
    } catch (err) {
      errors.push(`${name}: ${String((err as Error).stack ?? err)}`);
      log(`${name} failed: ${String((err as Error).message ?? err)}`);
      return null;
    }
  };
  try {
    if (COMPARE) {
      await attempt('comparison', async () => {
        for (let round = 1; round <= ROUNDS; round++) {
          const r: Partial<Record<System, SystemRun>> = {};
          rounds.push(r);
          if (ONLY !== 'svc') r.baseline = await runBaseline(env, round);
          if (ONLY !== 'baseline') r.svc = await runSvc(env, round);
        }
      });
    }
    if (SCENARIOS.has('workers')) workers = await attempt('workers', () => runWorkersScenario(scenarioEnv));
    if (SCENARIOS.has('burst')) burst = await attempt('burst', () => runBurstScenario(scenarioEnv));
    if (SCENARIOS.has('ingest')) ingest = await attempt('ingest', () => runIngestScenario(scenarioEnv));
    if (SCENARIOS.has('tenancy')) tenancy = await attempt('tenancy', () => runTenancyScenario(scenarioEnv));
    if (SCENARIOS.has('history')) {
      history = await attempt('history', () => runHistoryScenario(scenarioEnv));
      if (history?.recovery_error) errors.push(`history recovery: ${history.recovery_error}`);
    }
  } finally {
    await closeProducers();
    await nc.drain().catch(() => {});
    await receiver.close();
    await nats.stop();
  }

  const perRound = rounds
    .filter((r) => r.baseline && r.svc)
    .map((r) => r.svc!.cases.map((s) => ratiosOf(s, r.baseline!.cases.find((b) => b.fanout === s.fanout)!)));
  const ratios = medianRatios(perRound);
  const summary = summarise(rounds);
  const result = {
    generated_at: new Date().toISOString(),
    wall_seconds: Math.round((Date.now() - started) / 1000),
    loadavg_at_start: loadStart,
    loadavg_at_end: os.loadavg().map((x) => Math.round(x * 100) / 100),
    machine: machine(),
    config: {
      scenarios: [...SCENARIOS],
      rounds: ROUNDS,
      cases: CASES,
      window_deliveries: WINDOW_DELIVERIES,
      paced_kept_up_tail_ms: KEPT_UP_TAIL_MS,
      phase_time_limit_ms: PHASE_LIMIT_MS,
      max_in_flight_per_webhook: 8,
      connections_per_origin: 64,
      scale: SCALE,
      sizes: SIZES,
    },
    ratios_median: perRound.length ? ratios : [],
    ratios_range: perRound.length ? ratioRanges(perRound) : [],
    ratios_per_round: perRound,
    summary_median: summary,
    rounds,
    workers,
    burst,
    ingest,
    tenancy,
    history,
    error: errors.length ? errors.join('\n') : null,
  };
  fs.mkdirSync(RESULTS, { recursive: true });
  const file = path.join(RESULTS, 'latest.json');
  fs.writeFileSync(`${file}.tmp`, `${JSON.stringify(result, null, 2)}\n`);
  fs.renameSync(`${file}.tmp`, file);

  if (rounds.length) {
    process.stdout.write(`\nmedians over ${rounds.length} round(s); ratios are svc / baseline of the same round\n${table(summary, perRound.length ? ratios : [])}\n\n`);
    const ranges = perRound.length ? ratioRanges(perRound) : [];
    for (const r of perRound.length ? ratios : []) {
      const pct = (v: number | null) => (v === null ? '-' : `${Math.round(v * 100)} %`);
      const range = ranges.find((x) => x.fanout === r.fanout)?.throughput as [number, number] | null | undefined;
      const svcPaced = summary[`x${r.fanout}`]?.svc;
      process.stdout.write(
        `x${r.fanout}: svc throughput ${pct(r.throughput)} of the baseline` +
          `${range ? ` (rounds ${pct(range[0])}–${pct(range[1])})` : ''}, steady state ${pct(r.steady_throughput)}; ` +
          `latency p50/p99 ${r.saturated_latency_p50}x/${r.saturated_latency_p99}x saturated, ${r.paced_latency_p50}x/${r.paced_latency_p99}x paced` +
          `${svcPaced?.paced_p99_ms !== null && svcPaced?.paced_p99_ms !== undefined ? ` (svc paced p99 ${svcPaced.paced_p99_ms} ms at ${svcPaced.paced_deliveries_per_sec} deliveries/s)` : ''}; ` +
          `svc CPU per delivery ${r.sut_cpu_per_delivery}x\n`,
      );
    }
  }
  const more = scenarioTables({ workers, burst, ingest, tenancy, history });
  if (more) process.stdout.write(`\n${more}\n`);
  process.stdout.write(`\nload average ${result.loadavg_at_start.join(' ')} at the start, ${result.loadavg_at_end.join(' ')} at the end\nresults: ${path.relative(ROOT, file)} (${result.wall_seconds} s)\n`);
  if (errors.length) {
    log(`failed: ${errors.join('\n')}; logs in ${tmp}`);
    process.exitCode = 1;
  } else if (KEEP_LOGS) {
    log(`logs and databases kept in ${tmp}`);
  } else {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
