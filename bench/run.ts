// `npm run bench`: svc against a bare NATS → undici baseline (the floor) and a Redis + BullMQ peer,
// webhook fan-out to 10 and 100 hooks; svc in embedded mode against the same floor; and the other
// scenarios of issue 10 (bench/scenarios.ts: workers scale-out, burst, ingest alone, …).
//
//   private nats-server (JetStream, temp dir, free port)
//   producer (this process) ── NATS requests svc.ingest.<org>.workflows.bwf_<seq> ──▶ system under test
//   system under test (child processes) ── HTTP POST × fan-out ──▶ receiver (this process, 204 at once)
//
// The systems under test: the baseline (bench/baseline.ts), the peer (bench/peer.ts: an ingest and
// a worker process on a private redis-server), svc (`bin/svc.mjs serve --nats …`, its delivery
// threads included) and, in the `embedded` scenario, svc without NATS (bench/embedded-svc.ts), each
// alone and in processes of its own, so that none shares an event loop with the producer and the
// receiver; all answer svc.ingest.>, so never two at once. They alternate over several rounds
// (baseline, peer, svc, baseline, peer, svc, …): each figure is compared with the other systems' of
// its own round and the report gives the median of those ratios over rounds, so that other load on
// the machine does not skew one side only. For each fan-out: a warm-up, a saturated closed-loop
// phase (throughput; latency under load, mostly queueing) and a paced open-loop phase at a fixed
// offered load (latency when not overloaded). Results: tables on stdout, JSON in
// bench/results/latest.json.
//
// Environment knobs: BENCHMARKS.md has them all (BENCH_SCENARIOS, BENCH_ROUNDS, BENCH_FANOUTS,
// BENCH_SCALE, BENCH_PACED_RATE, BENCH_PACED_SECONDS, BENCH_ONLY, BENCH_PEER, BENCH_SVC_ROOT,
// BENCH_EMBEDDED_*, BENCH_SVC_NODE_ARGS, and the sizes of the other scenarios).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { findNatsServer } from '../test/helpers/nats-server.ts';
import {
  closeProducers,
  KEPT_UP_TAIL_MS,
  runPhase,
  startBenchReceiver,
  type BenchReceiver,
  type CpuPids,
  type PhaseResult,
  svcCpuPids,
} from './harness.ts';
import {
  createSvcOrg,
  createWebhooks,
  log,
  ROOT,
  sleep,
  spawnChild,
  startNats,
  startRedis,
  startSvcServe,
  stopChild,
  SVC_NODE_ARGS,
  SVC_ROOT,
  svcCounters,
  warnings,
  type Child,
  type OrgAuth,
  type Redis,
} from './procs.ts';
import {
  runBurstScenario,
  runHistoryScenario,
  runIngestScenario,
  runRecoveryTenancyScenario,
  runTenancyScenario,
  runWorkersScenario,
  SIZES,
  type BurstResult,
  type HistoryResult,
  type IngestScenarioResult,
  type RecoveryTenancyResult,
  type ScenarioEnv,
  type TenancyResult,
  type WorkersResult,
} from './scenarios.ts';
import { runReplicasScenario, type ReplicasResult } from './replicas.ts';
import { ingestStreamTable, runIngestStreamScenario, type IngestStreamResult } from './ingest-stream.ts';

const RESULTS = path.join(ROOT, 'bench', 'results');
const SCALE = Number(process.env.BENCH_SCALE ?? '1') || 1;
/** BENCH_KEEP_LOGS=1: keep the work directory (svc logs, databases) after a successful run too. */
const KEEP_LOGS = /^(1|true|yes|on)$/i.test(process.env.BENCH_KEEP_LOGS ?? '');
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? '3') || 3);

const ALL_SCENARIOS = [
  'throughput',
  'paced',
  'embedded',
  'workers',
  'burst',
  'ingest',
  'ingest-stream',
  'tenancy',
  'recovery',
  'replicas',
  'history',
] as const;
/** What runs when BENCH_SCENARIOS is not set: all but `history` (3–6 min on its own; BENCH_SCENARIOS=history). */
const DEFAULT_SCENARIOS = ALL_SCENARIOS.filter((s) => s !== 'history');
type Scenario = (typeof ALL_SCENARIOS)[number];
const SCENARIOS: Set<Scenario> = (() => {
  const raw = (process.env.BENCH_SCENARIOS ?? '').trim();
  if (!raw) return new Set(DEFAULT_SCENARIOS);
  const names = raw
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  const unknown = names.filter((n) => !(ALL_SCENARIOS as readonly string[]).includes(n));
  if (unknown.length) throw new Error(`BENCH_SCENARIOS: unknown ${unknown.join(', ')} (known: ${ALL_SCENARIOS.join(', ')})`);
  return new Set(names as Scenario[]);
})();
const COMPARE = SCENARIOS.has('throughput') || SCENARIOS.has('paced');

/** The systems under test: the floor, the BullMQ peer, svc in NATS mode, svc embedded. */
const ALL_SYSTEMS = ['baseline', 'peer', 'svc', 'embedded'] as const;
type System = (typeof ALL_SYSTEMS)[number];
/** BENCH_ONLY=svc,peer (any of ALL_SYSTEMS): only these systems run; ratios need both of their sides. */
const ONLY: Set<System> | null = (() => {
  const names = (process.env.BENCH_ONLY ?? '')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  if (!names.length) return null;
  const unknown = names.filter((n) => !(ALL_SYSTEMS as readonly string[]).includes(n));
  if (unknown.length) throw new Error(`BENCH_ONLY: unknown ${unknown.join(', ')} (known: ${ALL_SYSTEMS.join(', ')})`);
  return new Set(names as System[]);
})();
/** BENCH_PEER=off leaves the Redis + BullMQ peer out of the comparison. */
const PEER_ON = !/^(0|off|false|no)$/i.test((process.env.BENCH_PEER ?? '').trim());
const selected = (s: System) => (ONLY ? ONLY.has(s) : s !== 'peer' || PEER_ON);

/** Deliveries in flight at most per closed-loop phase: enough to keep every hook's 8 slots busy. */
const WINDOW_DELIVERIES = 2000;

/**
 * A knob of deliveries/s per fan-out: one number for every fan-out (`10000`), or `fanout:rate`
 * pairs (`10:10000,100:2000`); a fan-out it does not name gets `fallback`.
 */
function rateKnob(name: string, defaults: Record<number, number>, fallback: number): (fanout: number) => number {
  const raw = (process.env[name] ?? '').trim();
  if (/^\d+(\.\d+)?$/.test(raw) && Number(raw) > 0) return () => Number(raw);
  const map: Record<number, number> = raw ? {} : { ...defaults };
  for (const pair of raw.split(',').filter(Boolean)) {
    const m = /^\s*(\d+)\s*:\s*(\d+(?:\.\d+)?)\s*$/.exec(pair);
    if (!m || Number(m[2]) <= 0) throw new Error(`${name}: "${pair}" is not <deliveries/s> or <fanout>:<deliveries/s>`);
    map[Number(m[1])] = Number(m[2]);
  }
  return (fanout) => map[fanout] ?? fallback;
}

/**
 * Deliveries/s offered in the paced phase of each fan-out. Issue 10's target is 1 000 facts/s × 10
 * webhooks with a p99 ≤ 10 ms, so x10 is paced at 10 000 deliveries/s; other fan-outs at 2 000.
 */
const pacedRateFor = rateKnob('BENCH_PACED_RATE', { 10: 10_000 }, 2000);
/**
 * The embedded scenario's paced load: a rate embedded svc sustains on the 2-core bench machine
 * (one process for the engine, the bridge and delivery), the same for the floor of its rounds.
 */
const embeddedPacedRateFor = rateKnob('BENCH_EMBEDDED_PACED_RATE', {}, 2000);
/** The embedded scenario's saturated phase: this share of the comparison's (BENCH_SCALE included). */
const EMBEDDED_SCALE = Number(process.env.BENCH_EMBEDDED_SCALE ?? '') || 0.4;
const EMBEDDED_ROUNDS = Math.max(1, Number(process.env.BENCH_EMBEDDED_ROUNDS ?? '') || 2);
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

const FANOUTS = (process.env.BENCH_FANOUTS ?? '10,100')
  .split(',')
  .map((x) => Number(x))
  .filter((f) => Number.isInteger(f) && f > 0);

/** Each case: 25 000 deliveries measured × scale (3 000 in the warm-up), e.g. 2 500 facts × 10 hooks. */
function casesFor(scale: number, pacedRate: (fanout: number) => number): CaseSpec[] {
  return FANOUTS.map((fanout) => {
    const paced = pacedRate(fanout);
    return {
      fanout,
      warmupEvents: Math.ceil(3000 / fanout),
      events: Math.max(1, Math.round((Math.min(5000 * fanout, 25_000) / fanout) * scale)),
      pacedDeliveriesPerSec: paced,
      pacedSeconds: Math.round(pacedSecondsFor(paced / fanout) * 10) / 10,
    };
  });
}
const CASES = casesFor(SCALE, pacedRateFor);
const EMBEDDED_CASES = casesFor(SCALE * EMBEDDED_SCALE, embeddedPacedRateFor);
const PHASE_LIMIT_MS = 25_000;
const DRAIN_MS = 10_000;

/** Which phases of a case run. */
interface Phases {
  saturated: boolean;
  paced: boolean;
}

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

/** One round of a comparison: each selected system's run. */
type Round = Partial<Record<System, SystemRun>>;

let nextSeq = 1;
function takeSeqs(n: number): number {
  const first = nextSeq;
  nextSeq += n;
  return first;
}

/** Warm-up, saturated and paced phases of every case against whatever answers the ingest subjects now. */
async function runCases(
  system: System,
  env: Env,
  orgs: Map<number, OrgAuth>,
  cpuPids: CpuPids,
  cases: CaseSpec[],
  phases: Phases,
): Promise<CaseResult[]> {
  const { nc, receiver } = env;
  const out: CaseResult[] = [];
  for (const c of cases) {
    const orgId = orgs.get(c.fanout)!.org_id;
    const window = Math.max(1, Math.floor(WINDOW_DELIVERIES / c.fanout));
    const common = { orgId, fanout: c.fanout, timeLimitMs: PHASE_LIMIT_MS, drainMs: DRAIN_MS, cpuPids };
    const warm = await runPhase(nc, receiver, {
      ...common,
      name: `${system} warm-up x${c.fanout}`,
      events: c.warmupEvents,
      firstSeq: takeSeqs(c.warmupEvents),
      window,
    });
    log(`${system} x${c.fanout} warm-up: ${warm.deliveries}/${warm.deliveries_expected} deliveries, ${warm.deliveries_per_sec}/s`);
    await sleep(300);
    let saturated: PhaseResult | null = null;
    if (phases.saturated) {
      saturated = await runPhase(nc, receiver, {
        ...common,
        name: `${system} saturated x${c.fanout}`,
        events: c.events,
        firstSeq: takeSeqs(c.events),
        window,
      });
      log(
        `${system} x${c.fanout} saturated: ${saturated.deliveries}/${saturated.deliveries_expected} deliveries ` +
          `in ${saturated.duration_ms} ms = ` +
          `${saturated.deliveries_per_sec}/s; latency p50 ${saturated.latency_ms.p50} p99 ${saturated.latency_ms.p99} ms`,
      );
      await sleep(300);
    }
    let paced: PhaseResult | null = null;
    if (phases.paced) {
      const rate = c.pacedDeliveriesPerSec / c.fanout;
      const pacedEvents = Math.max(10, Math.round(rate * c.pacedSeconds));
      paced = await runPhase(nc, receiver, {
        ...common,
        name: `${system} paced x${c.fanout}`,
        events: pacedEvents,
        firstSeq: takeSeqs(pacedEvents),
        ratePerSec: rate,
      });
      log(
        `${system} x${c.fanout} paced at ${Math.round(rate)} facts/s for ${c.pacedSeconds} ` +
          `s: ${paced.deliveries}/${paced.deliveries_expected} deliveries; ` +
          `latency p50 ${paced.latency_ms.p50} p99 ${paced.latency_ms.p99} ` +
          `ms${paced.kept_up ? '' : `; DID NOT KEEP UP (last delivery ${paced.tail_ms} ms after the last send)`}`,
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

/** BENCH_TARGETS of the floor and the peer: each org's webhook URLs, the same ones svc's webhooks have. */
function targetsOf(env: Env, orgs: Map<number, OrgAuth>): string {
  const targets: Record<string, string[]> = {};
  for (const [fanout, org] of orgs) targets[org.org_id] = hookUrls(env.receiver, fanout);
  return JSON.stringify(targets);
}

const loadNow = () => Math.round(os.loadavg()[0] * 100) / 100;

/** What a comparison runs: its cases and phases, the orgs its systems serve, a name for its logs. */
interface Comparison {
  name: string;
  cases: CaseSpec[];
  phases: Phases;
  orgs: Map<number, OrgAuth>;
}

async function runBaseline(env: Env, cmp: Comparison, round: number): Promise<SystemRun> {
  const { child } = await spawnChild(
    'baseline',
    ['--import', 'tsx', 'bench/baseline.ts'],
    { BENCH_NATS_URL: env.natsUrl, BENCH_TARGETS: targetsOf(env, cmp.orgs) },
    (l) => l.trim() === 'ready',
    path.join(env.tmp, `${cmp.name}-baseline-${round}.log`),
  );
  try {
    const loadavg = loadNow();
    const cases = await runCases('baseline', env, cmp.orgs, { sut: child.pid ?? null, nats: env.natsPid }, cmp.cases, cmp.phases);
    return { cases, notes: { loadavg_1m_at_start: loadavg } };
  } finally {
    await stopChild(child);
  }
}

/**
 * The peer: its ingest and worker processes, on the run's redis-server (started once; what the
 * last round left there is finished work, kept a while for the jobId dedup). Its CPU (`sut`) is
 * both processes'; redis-server's is reported beside nats-server's.
 */
async function runPeer(env: Env, cmp: Comparison, round: number): Promise<SystemRun> {
  if (!env.redis) throw new Error('the peer needs the run’s redis-server');
  const common = { BENCH_NATS_URL: env.natsUrl, BENCH_REDIS_PORT: String(env.redis.port), BENCH_TARGETS: targetsOf(env, cmp.orgs) };
  const started: Child[] = [];
  try {
    // the worker first: the ingest's first answer means a job is queued, not that anyone takes it
    for (const role of ['worker', 'ingest'] as const) {
      started.push(
        await spawnChild(
          `peer ${role}`,
          ['--import', 'tsx', 'bench/peer.ts', role],
          common,
          (l) => l.trim() === 'ready',
          path.join(env.tmp, `${cmp.name}-peer-${role}-${round}.log`),
        ),
      );
    }
    const [worker, ingest] = started;
    const loadavg = loadNow();
    const pids: CpuPids = {
      sut: [ingest.pid ?? 0, worker.pid ?? 0],
      ingest: ingest.pid,
      worker: worker.pid,
      nats: env.natsPid,
      redis: env.redis.pid,
    };
    const cases = await runCases('peer', env, cmp.orgs, pids, cmp.cases, cmp.phases);
    return { cases, notes: { loadavg_1m_at_start: loadavg } };
  } finally {
    // the ingest first, so that nothing is queued that the worker will not take
    for (const c of started.reverse()) await stopChild(c.child);
  }
}

/** The svc process's notes: its delivery setup, /metrics counters and pino warnings. */
async function svcNotes(line: string, url: string, lines: string[], loadavg: number): Promise<Record<string, unknown>> {
  const counters = await svcCounters(url);
  if (counters.hop_events_per_message !== null) log(`svc published ${counters.hop_events_per_message.toFixed(1)} events per hop message`);
  return {
    loadavg_1m_at_start: loadavg,
    delivery: /"delivery":"([^"]*)"/.exec(line)?.[1] ?? null,
    ...counters,
    log_warnings: warnings(lines).length,
  };
}

function reportWarnings(what: string, lines: string[]): void {
  const w = warnings(lines);
  if (w.length) log(`${what} logged ${w.length} warnings/errors, e.g. ${w[0].slice(0, 300)}`);
}

/** svc serve --nats (delivery threads: svc's default); its pid's CPU time includes every thread. */
async function runSvc(env: Env, cmp: Comparison, round: number): Promise<SystemRun> {
  const svc = await startSvcServe({ natsUrl: env.natsUrl, db: env.db, logFile: path.join(env.tmp, `${cmp.name}-svc-${round}.log`) });
  try {
    if (round === 1) {
      // webhooks over the HTTP API: all_events, signed (a secret), one URL each on the one receiver;
      // they stay in svc's database for the later rounds
      for (const [fanout, org] of cmp.orgs) await createWebhooks(svc.url, org, hookUrls(env.receiver, fanout));
    }
    const loadavg = loadNow();
    const cases = await runCases('svc', env, cmp.orgs, svcCpuPids(svc.pid, env.natsPid), cmp.cases, cmp.phases);
    return { cases, notes: await svcNotes(svc.line, svc.url, svc.lines, loadavg) };
  } finally {
    await stopChild(svc.child);
    reportWarnings('svc', svc.lines);
  }
}

/**
 * svc in embedded mode (bench/embedded-svc.ts: startServer with no NATS, and the bridge from the
 * bench's NATS into its in-process bus), on a database of its own kept over the rounds.
 */
async function runEmbedded(env: Env, cmp: Comparison, round: number): Promise<SystemRun> {
  const svc = await spawnChild(
    'embedded svc',
    [...SVC_NODE_ARGS, '--import', 'tsx', 'bench/embedded-svc.ts'],
    { BENCH_SVC_ROOT: SVC_ROOT, BENCH_NATS_URL: env.natsUrl, BENCH_DB: env.embeddedDb },
    (l) => l.startsWith('embedded ready '),
    path.join(env.tmp, `${cmp.name}-embedded-${round}.log`),
  );
  const url = svc.line.slice('embedded ready '.length).trim();
  try {
    if (round === 1) for (const [fanout, org] of cmp.orgs) await createWebhooks(url, org, hookUrls(env.receiver, fanout));
    const loadavg = loadNow();
    const listening = svc.lines.find((l) => l.includes('listening on')) ?? '';
    const cases = await runCases('embedded', env, cmp.orgs, svcCpuPids(svc.pid, env.natsPid), cmp.cases, cmp.phases);
    return { cases, notes: await svcNotes(listening, url, svc.lines, loadavg) };
  } finally {
    await stopChild(svc.child);
    reportWarnings('embedded svc', svc.lines);
  }
}

const RUNNERS: Record<System, (env: Env, cmp: Comparison, round: number) => Promise<SystemRun>> = {
  baseline: runBaseline,
  peer: runPeer,
  svc: runSvc,
  embedded: runEmbedded,
};

/** Rounds of a comparison: every system in turn (in the order given), each alone, `rounds` times. */
async function runRounds(env: Env, cmp: Comparison, systems: System[], rounds: number, into: Round[]): Promise<void> {
  for (let round = 1; round <= rounds; round++) {
    const r: Round = {};
    into.push(r);
    for (const sys of systems) r[sys] = await RUNNERS[sys](env, cmp, round);
  }
}

interface Env {
  natsUrl: string;
  nc: NatsConnection;
  receiver: BenchReceiver;
  /** svc's database of the comparison (NATS mode) */
  db: string;
  /** embedded svc's database */
  embeddedDb: string;
  tmp: string;
  natsPid: number | null;
  /** the peer's redis-server, when the peer runs */
  redis: Redis | null;
}

/** A checkout's commit and its uncommitted service files (src, store, machines). */
function gitState(dir: string): { commit: string; dirty: string[] } {
  try {
    const quiet = { cwd: dir, stdio: ['ignore', 'pipe', 'ignore'] as ['ignore', 'pipe', 'ignore'] };
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], quiet).toString().trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'store', 'machines'], quiet)
      .toString()
      .split('\n')
      .filter(Boolean)
      .map((l) => l.slice(3));
    return { commit, dirty };
  } catch {
    return { commit: 'unknown', dirty: [] }; // not a git checkout
  }
}

function machine(): Record<string, unknown> {
  const cpus = os.cpus();
  const bench = gitState(ROOT);
  const svc = SVC_ROOT === ROOT ? bench : gitState(SVC_ROOT);
  let nats = 'unknown';
  try {
    nats = execFileSync(findNatsServer() ?? 'nats-server', ['--version'], { stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .trim();
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
    git_commit: bench.commit,
    uncommitted_service_files: bench.dirty,
    /** the svc measured (BENCH_SVC_ROOT), when it is not this checkout */
    svc_root: SVC_ROOT === ROOT ? null : SVC_ROOT,
    svc_git_commit: svc.commit,
    svc_uncommitted_service_files: svc.dirty,
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

/** CPU per delivery of the system and its brokers: the system's processes, nats-server and (the peer's) redis-server. */
function withBrokersCpu(p: PhaseResult | null | undefined): number | null {
  const c = p?.cpu_us_per_delivery;
  if (!c || c.sut === null || c.sut === undefined || c.nats === null || c.nats === undefined) return null;
  return c.sut + c.nats + (c.redis ?? 0);
}

type Ratios = ReturnType<typeof ratiosOf>;

/** Each figure of `a` over the same figure of `b` (one round, one fan-out). */
function ratiosOf(a: CaseResult, b: CaseResult) {
  return {
    fanout: a.fanout,
    throughput: ratio(a.saturated?.deliveries_per_sec, b.saturated?.deliveries_per_sec),
    steady_throughput: ratio(a.saturated?.steady_deliveries_per_sec, b.saturated?.steady_deliveries_per_sec),
    saturated_latency_p50: ratio(a.saturated?.latency_ms.p50, b.saturated?.latency_ms.p50),
    saturated_latency_p99: ratio(a.saturated?.latency_ms.p99, b.saturated?.latency_ms.p99),
    paced_latency_p50: ratio(a.paced?.latency_ms.p50, b.paced?.latency_ms.p50),
    paced_latency_p99: ratio(a.paced?.latency_ms.p99, b.paced?.latency_ms.p99),
    /** 1 when both sides' paced phases kept up (their p99s are latencies, not queue lengths), else 0 */
    paced_both_kept_up: a.paced && b.paced ? (a.paced.kept_up && b.paced.kept_up ? 1 : 0) : null,
    sut_cpu_per_delivery: ratio(a.saturated?.cpu_us_per_delivery.sut, b.saturated?.cpu_us_per_delivery.sut),
    /** with nats-server and redis-server: what the whole pipeline costs */
    with_brokers_cpu_per_delivery: ratio(withBrokersCpu(a.saturated), withBrokersCpu(b.saturated)),
  };
}

/** A ratio between two systems of a comparison, e.g. svc over the baseline. */
type Pair = readonly [System, System];
const pairName = ([a, b]: Pair) => `${a}/${b}`;

interface PairReport {
  /** per round, per fan-out */
  per_round: Ratios[][];
  /** per fan-out: the median over rounds of each ratio */
  median: Ratios[];
  /** per fan-out: the lowest and highest per-round ratio of each figure */
  range: Array<{ fanout: number } & Record<string, [number, number] | null | number>>;
}

function pairReport(rounds: Round[], cases: CaseSpec[], [a, b]: Pair): PairReport | null {
  const perRound = rounds
    .filter((r) => r[a] && r[b])
    .map((r) => r[a]!.cases.map((s) => ratiosOf(s, r[b]!.cases.find((x) => x.fanout === s.fanout)!)));
  if (!perRound.length) return null;
  const ofCase = (fanout: number) => perRound.map((r) => r.find((x) => x.fanout === fanout)).filter((x): x is Ratios => !!x);
  const keys = Object.keys(perRound[0][0] ?? {}).filter((k) => k !== 'fanout') as Array<Exclude<keyof Ratios, 'fanout'>>;
  const med = cases.map((c) => {
    const rs = ofCase(c.fanout);
    const out = { fanout: c.fanout } as Ratios;
    for (const k of keys) out[k] = median(rs.map((r) => r[k]));
    return out;
  });
  const range = cases.map((c) => {
    const rs = ofCase(c.fanout);
    const out: Record<string, [number, number] | null> = {};
    for (const k of keys) {
      const v = rs.map((r) => r[k]).filter((x): x is number => typeof x === 'number');
      out[k] = v.length ? [Math.min(...v), Math.max(...v)] : null;
    }
    return { fanout: c.fanout, ...out };
  });
  return { per_round: perRound, median: med, range };
}

/** Per fan-out and system: the median over rounds of each headline figure. */
function summarise(rounds: Round[], cases: CaseSpec[], systems: readonly System[]) {
  const out: Record<string, Record<string, Record<string, number | null>>> = {};
  for (const c of cases) {
    const per: Record<string, Record<string, number | null>> = {};
    for (const sys of systems) {
      const rs = rounds.map((r) => r[sys]?.cases.find((x) => x.fanout === c.fanout)).filter((x): x is CaseResult => !!x);
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
        /** of it, svc's engine's thread (null for the peer and the floor) */
        sut_main_cpu_us_per_delivery: median(rs.map((r) => r.saturated?.cpu_us_per_delivery.sut_main)),
        nats_cpu_us_per_delivery: median(rs.map((r) => r.saturated?.cpu_us_per_delivery.nats)),
        redis_cpu_us_per_delivery: median(rs.map((r) => r.saturated?.cpu_us_per_delivery.redis)),
        with_brokers_cpu_us_per_delivery: median(rs.map((r) => withBrokersCpu(r.saturated))),
        bench_cpu_us_per_delivery: median(rs.map((r) => r.saturated?.cpu_us_per_delivery.bench)),
        missing: rs.reduce((n, r) => n + (r.saturated?.missing ?? 0) + (r.paced?.missing ?? 0), 0),
        duplicates: rs.reduce((n, r) => n + (r.saturated?.duplicates ?? 0) + (r.paced?.duplicates ?? 0), 0),
      };
    }
    out[`x${c.fanout}`] = per;
  }
  return out;
}

const fmt = (v: number | null | undefined) =>
  v === null || v === undefined || !Number.isFinite(v) ? '-' : String(Math.round(v * 100) / 100);
const times = (v: number | null | undefined) => (v === null || v === undefined ? '-' : `${Math.round(v * 100) / 100}x`);

function grid(rows: string[][], leftColumns = 2): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows.map((r) => r.map((cell, i) => (i < leftColumns ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  ')).join('\n');
}

/** Per fan-out: a row per system (medians), then a row per ratio (medians of the per-round ratios). */
function table(
  summary: ReturnType<typeof summarise>,
  cases: CaseSpec[],
  systems: readonly System[],
  pairs: Array<[string, PairReport]>,
): string {
  const rows: string[][] = [
    [
      'fan-out',
      'system',
      'del/s',
      'steady del/s',
      'sat p50 ms',
      'sat p99 ms',
      'paced del/s',
      'paced p50 ms',
      'paced p99 ms',
      'kept up',
      'cpu µs/del',
      'engine thread µs/del',
      'nats µs/del',
      'redis µs/del',
      'all µs/del',
      'missing',
      'dup',
    ],
  ];
  for (const c of cases) {
    const per = summary[`x${c.fanout}`] ?? {};
    for (const sys of systems) {
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
        fmt(s.sut_main_cpu_us_per_delivery),
        fmt(s.nats_cpu_us_per_delivery),
        fmt(s.redis_cpu_us_per_delivery),
        fmt(s.with_brokers_cpu_us_per_delivery),
        String(s.missing),
        String(s.duplicates),
      ]);
    }
    for (const [name, rep] of pairs) {
      const r = rep.median.find((x) => x.fanout === c.fanout);
      if (!r) continue;
      const range = rep.range.find((x) => x.fanout === c.fanout);
      // the median, and the lowest–highest round when there are several and they differ
      const cell = (k: Exclude<keyof Ratios, 'fanout' | 'paced_both_kept_up'>) => {
        const span = range?.[k];
        const spread = Array.isArray(span) && span[0] !== span[1] ? ` (${fmt(span[0])}–${fmt(span[1])})` : '';
        return `${times(r[k])}${spread}`;
      };
      const kept = rep.per_round
        .map((x) => x.find((y) => y.fanout === c.fanout)?.paced_both_kept_up)
        .filter((x) => x !== null && x !== undefined);
      rows.push([
        String(c.fanout),
        name,
        cell('throughput'),
        cell('steady_throughput'),
        cell('saturated_latency_p50'),
        cell('saturated_latency_p99'),
        '',
        cell('paced_latency_p50'),
        cell('paced_latency_p99'),
        kept.length ? `${kept.filter((x) => x === 1).length}/${kept.length}` : '',
        cell('sut_cpu_per_delivery'),
        '',
        '',
        '',
        cell('with_brokers_cpu_per_delivery'),
        '',
        '',
      ]);
    }
  }
  return grid(rows);
}

/** One line per ratio and fan-out: the headline figures with their range over rounds. */
function ratioLines(pairs: Array<[string, PairReport]>, summary: ReturnType<typeof summarise>): string {
  const pct = (v: number | null | undefined) => (v === null || v === undefined ? '-' : `${Math.round(v * 100)} %`);
  const span = (v: unknown, f: (x: number) => string) => (Array.isArray(v) ? ` (rounds ${f(v[0] as number)}–${f(v[1] as number)})` : '');
  const lines: string[] = [];
  for (const [name, rep] of pairs) {
    const [a] = name.split('/');
    for (const r of rep.median) {
      const range = rep.range.find((x) => x.fanout === r.fanout);
      const own = summary[`x${r.fanout}`]?.[a];
      lines.push(
        `x${r.fanout} ${name}: throughput ${pct(r.throughput)}${span(range?.throughput, pct)}, steady state ${pct(r.steady_throughput)}; ` +
          `latency p50/p99 ${times(r.saturated_latency_p50)}/${times(r.saturated_latency_p99)} ` +
          `saturated, ${times(r.paced_latency_p50)}/${times(r.paced_latency_p99)}${span(range?.paced_latency_p99, times)} paced` +
          `${
            own?.paced_p99_ms !== null && own?.paced_p99_ms !== undefined
              ? ` (${a} paced p99 ${own.paced_p99_ms} ms at ${own.paced_deliveries_per_sec} deliveries/s)`
              : ''
          }; ` +
          `CPU per delivery ${times(r.sut_cpu_per_delivery)}${span(range?.sut_cpu_per_delivery, times)}, with the ` +
          `brokers ${times(r.with_brokers_cpu_per_delivery)}`,
      );
    }
  }
  return lines.join('\n');
}

function scenarioTables(s: {
  workers?: WorkersResult | null;
  burst?: BurstResult | null;
  ingest?: IngestScenarioResult | null;
  tenancy?: TenancyResult | null;
  recovery?: RecoveryTenancyResult | null;
  replicas?: ReplicasResult | null;
  history?: HistoryResult | null;
  ingestStream?: IngestStreamResult | null;
}): string {
  const out: string[] = [];
  if (s.ingestStream) out.push(ingestStreamTable(s.ingestStream));
  if (s.replicas) {
    const r = s.replicas;
    const rows = [
      ['round', 'replicas', 'del/s', 'sat p99 ms', 'svc µs/del', 'nats µs/del (3 servers)', 'paced p50 ms', 'paced p99 ms', 'missing'],
    ];
    for (const x of r.sides) {
      rows.push([
        String(x.round),
        String(x.replicas),
        fmt(x.saturated.deliveries_per_sec),
        fmt(x.saturated.latency_ms.p99),
        fmt(x.saturated.cpu_us_per_delivery.sut),
        fmt(x.saturated.cpu_us_per_delivery.nats),
        fmt(x.paced.latency_ms.p50),
        fmt(x.paced.latency_ms.p99),
        String(x.saturated.missing + x.paced.missing),
      ]);
    }
    out.push(
      `replicas: svc serve on a 3-server NATS cluster (one machine), --nats-replicas 1 against 3, ` +
        `fan-out ${r.config.fanout}, ${r.config.facts} facts saturated, ${r.config.paced_rate} facts/s paced\n` +
        `${grid(rows, 2)}\nreplicas 3 / replicas 1 throughput: ${times(r.throughput_ratio_median)} ` +
        `(rounds ${r.throughput_ratio_per_round.map((x) => times(x)).join(', ')}); nats-server CPU per ` +
        `delivery ${r.nats_cpu_ratio_per_round.map((x) => times(x)).join(', ')}`,
    );
  }
  if (s.workers) {
    const w = s.workers;
    const rows = [['workers', 'del/s', 'bound del/s', 'of bound', 'messages left', 'engine µs/del', 'workers µs/del', 'nats µs/del']];
    for (const r of w.runs) {
      const workersCpu = Object.entries(r.cpu_us_per_delivery)
        .filter(([k]) => k.startsWith('worker'))
        .reduce((n, [, v]) => n + (v ?? 0), 0);
      rows.push([
        String(r.workers),
        fmt(r.deliveries_per_sec),
        fmt(r.bound_deliveries_per_sec),
        `${Math.round(r.of_bound * 100)} %`,
        String(r.backlog_messages_after),
        fmt(r.cpu_us_per_delivery.engine),
        fmt(workersCpu),
        fmt(r.cpu_us_per_delivery.nats),
      ]);
    }
    out.push(
      `workers: svc serve --no-deliver + svc worker × 1, 2; ${w.config.webhooks} webhooks (fan-out ${w.config.fanout}), ` +
        `--delivery-concurrency ${w.config.concurrency}, receiver answers after ${w.config.delay_ms} ms\n` +
        `${grid(rows, 1)}\nscale-out two/one: ${times(w.scale_ratio)} (target ≥ 1.7x)`,
    );
  }
  if (s.burst) {
    const b = s.burst;
    out.push(
      `burst: ${b.config.events} events × ${b.config.webhooks} webhooks (one org) = ${b.deliveries_expected} deliveries, svc ` +
        `serve, delivery: ${b.delivery ?? '?'}\n` +
        `  duration (first send → last receipt) ${b.burst.duration_ms} ms = ${b.burst.deliveries_per_sec} deliveries/s; latency ` +
        `p50 ${b.burst.latency_ms.p50} p99 ${b.burst.latency_ms.p99} ms\n` +
        `  failures: receiver ${b.receiver_failures} (missing ${b.burst.missing}, duplicates ${b.burst.duplicates}), ` +
        `svc_deliveries_total{outcome="failure"} +${b.svc_failures} (success +${b.svc_successes})\n` +
        `  svc serve RSS: ${b.rss.start_mib} MiB before, peak ${b.rss.peak_mib} MiB (${b.rss.samples} ` +
        `samples), ${b.rss.end_mib} MiB at the end; VmHWM ${b.rss.hwm_mib} MiB; ` +
        `CPU ${b.burst.cpu_us_per_delivery.sut} µs/delivery; ${b.config.webhooks} webhooks created in ${b.webhooks_create_ms} ms`,
    );
  }
  if (s.ingest) {
    const g = s.ingest;
    const rows = [
      [
        'round',
        'baseline facts/s',
        'svc facts/s',
        'svc/baseline',
        'svc ack p50 ms',
        'svc ack p99 ms',
        'svc µs/fact',
        'engine thread µs/fact',
        'nats µs/fact',
        'svc errors',
      ],
    ];
    g.rounds.forEach((r, i) =>
      rows.push([
        String(i + 1),
        fmt(r.baseline.facts_per_sec),
        fmt(r.svc.facts_per_sec),
        times(r.ratio),
        fmt(r.svc.ack_ms.p50),
        fmt(r.svc.ack_ms.p99),
        fmt(r.svc.cpu_us_per_fact.sut),
        fmt(r.svc.cpu_us_per_fact.sut_main),
        fmt(r.svc.cpu_us_per_fact.nats),
        String(r.svc.errors),
      ]),
    );
    rows.push([
      'median',
      fmt(g.median.baseline_facts_per_sec),
      fmt(g.median.svc_facts_per_sec),
      times(g.median.ratio),
      '',
      '',
      '',
      '',
      '',
      '',
    ]);
    out.push(
      `ingest alone: ${g.config.facts} facts per measurement, ${g.config.window} requests outstanding, svc serve --no-deliver, ` +
        `no webhooks (target ≥ 20 000 facts/s)\n${grid(rows, 1)}`,
    );
  }
  if (s.tenancy) {
    const t = s.tenancy;
    const rows = [['org B', 'deliveries', 'p50 ms', 'p99 ms', 'max ms']];
    for (const [name, p] of [
      ['alone', t.alone],
      ['beside A', t.beside],
    ] as const)
      rows.push([name, `${p.deliveries}/${p.deliveries_expected}`, fmt(p.latency_ms.p50), fmt(p.latency_ms.p99), fmt(p.latency_ms.max)]);
    rows.push(['beside/alone', '', times(t.ratio.p50), times(t.ratio.p99), times(t.ratio.max)]);
    out.push(
      `tenancy: org B ${t.config.rate} facts/s × ${t.config.webhooks} webhooks for ${t.config.seconds} s, alone and beside org ` +
        `A's ${t.config.tarpit_webhooks} webhooks that never answer ` +
        `(${t.tarpit_attempts} of A's attempts held meanwhile); B's slowest delivery ${t.added_max_ms} ms later beside A ` +
        `(target ≤ 1 000 ms)\n${grid(rows, 1)}`,
    );
  }
  if (s.recovery) {
    const t = s.recovery;
    const rows = [['org B', 'deliveries', 'p50 ms', 'p99 ms', 'max ms']];
    for (const [name, p] of [
      ['alone', t.alone],
      ["beside A's recoveries", t.beside],
    ] as const)
      rows.push([name, `${p.deliveries}/${p.deliveries_expected}`, fmt(p.latency_ms.p50), fmt(p.latency_ms.p99), fmt(p.latency_ms.max)]);
    rows.push(['beside/alone', '', times(t.ratio.p50), times(t.ratio.p99), times(t.ratio.max)]);
    const c = t.recover_calls;
    out.push(
      `recovery: org B ${t.config.rate} facts/s × 1 webhook for ${t.config.seconds} s, alone and beside org A's recoveries ` +
        `of ${t.config.events} events (${t.recovery_events ?? '?'} per recovery) ` +
        `into ${t.config.tarpit_webhooks} webhooks that never answer; A's recover calls: ${c.started} started, 409 ` +
        `× ${c.conflict + c.limit_exceeded} (conflict ${c.conflict}, limit_exceeded ${c.limit_exceeded})` +
        `${c.other ? `, other ${c.other}` : ''}; A's attempts at the tarpit meanwhile ${t.tarpit_attempts} (recoveries' ` +
        `attempted ${t.recovery_attempted.at_start} → ${t.recovery_attempted.at_end}); ` +
        `B's slowest delivery ${t.added_max_ms} ms later beside A (target: each within 1 000 ms)\n${grid(rows, 1)}`,
    );
  }
  if (s.history) {
    const h = s.history;
    const rows = [
      [
        'round',
        'order',
        'ret. 0 facts/s',
        'ret. 0 del/s',
        '7d facts/s',
        '7d del/s',
        '7d/0 facts/s',
        '7d/0 del/s',
        '7d/0 cpu/del',
        'missing',
      ],
    ];
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
    rows.push([
      'median',
      '',
      fmt(m.none_facts_per_sec),
      fmt(m.none_deliveries_per_sec),
      fmt(m.kept_facts_per_sec),
      fmt(m.kept_deliveries_per_sec),
      times(m.ratio_facts_per_sec),
      times(m.ratio_deliveries_per_sec),
      times(m.ratio_sut_cpu_per_delivery),
      '',
    ]);
    let text =
      `history: ${h.config.facts} facts × ${h.config.fanout} webhooks per measurement, svc serve --event-retention 0 and with ` +
      `the default 7d, interleaved; ` +
      `GET /v1/events listed ${h.events_listed.none ?? '?'} (retention 0) and ${h.events_listed.kept ?? '?'} (7d) with ` +
      `limit=1\n${grid(rows, 2)}`;
    const r = h.recovery;
    if (r) {
      const rec = [
        [
          'recovery',
          'events',
          'request → 202 ms',
          'request → all received ms',
          'events/s',
          '202 → all received ms',
          'events/s after 202',
          'request → done ms',
          'duplicates',
          'no header',
          'svc µs/event',
        ],
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
        `facts committed at ${r.emit.ingest.facts_per_sec}/s), then recovered to it answering 200; svc serve RSS ` +
        `peak ${r.rss.peak_mib ?? '-'} MiB\n${grid(rec, 1)}`;
    } else if (h.recovery_error) {
      text += `\nrecovery: failed (${h.recovery_error.split('\n')[0]})`;
    }
    out.push(text);
  }
  return out.join('\n\n');
}

/** BENCH_SVC_ROOT names another checkout: build its dist/ when stale, as `npm run bench` does this one's. */
function ensureSvcBuilt(): void {
  if (!fs.existsSync(path.join(SVC_ROOT, 'bin', 'svc.mjs'))) throw new Error(`BENCH_SVC_ROOT=${SVC_ROOT}: no bin/svc.mjs there`);
  const build = path.join(SVC_ROOT, 'scripts', 'build.mjs');
  if (fs.existsSync(build)) execFileSync(process.execPath, [build, '--if-stale'], { cwd: SVC_ROOT, stdio: 'inherit' });
}

/** The comparison's ratios: svc and the peer against the floor, and svc against the peer. */
const COMPARE_PAIRS: Pair[] = [
  ['svc', 'baseline'],
  ['peer', 'baseline'],
  ['svc', 'peer'],
];
const EMBEDDED_PAIRS: Pair[] = [['embedded', 'baseline']];

function pairReports(rounds: Round[], cases: CaseSpec[], pairs: Pair[]): Array<[string, PairReport]> {
  return pairs.map((p) => [pairName(p), pairReport(rounds, cases, p)] as const).filter((x): x is [string, PairReport] => x[1] !== null);
}

async function main(): Promise<void> {
  const started = Date.now();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
  if (SVC_ROOT !== ROOT) ensureSvcBuilt();
  const compareSystems = (['baseline', 'peer', 'svc'] as const).filter(selected);
  const embeddedSystems = (['baseline', 'embedded'] as const).filter(selected);
  const runCompare = COMPARE && compareSystems.length > 0;
  const runEmbeddedScenario = SCENARIOS.has('embedded') && embeddedSystems.length > 0;

  // the orgs (one per fan-out) exist in svc's databases before it starts, created by the svc under
  // test; the floor and the peer serve the same ids
  const db = path.join(tmp, 'svc.db');
  const embeddedDb = path.join(tmp, 'embedded.db');
  const orgs = new Map<number, OrgAuth>();
  const embeddedOrgs = new Map<number, OrgAuth>();
  if (runCompare) for (const c of CASES) orgs.set(c.fanout, createSvcOrg(db, `bench-x${c.fanout}`));
  if (runEmbeddedScenario)
    for (const c of EMBEDDED_CASES) embeddedOrgs.set(c.fanout, createSvcOrg(embeddedDb, `bench-embedded-x${c.fanout}`));

  const nats = await startNats();
  const receiver = await startBenchReceiver();
  // noAsyncTraces: no stack captured per request, which halves the producer's CPU per request
  const nc = await connect({ servers: nats.url, name: 'bench-producer', noAsyncTraces: true });
  const loadStart = os.loadavg().map((x) => Math.round(x * 100) / 100);
  log(
    `nats ${nats.url}, receiver ${receiver.url}, work dir ${tmp}; svc from ${SVC_ROOT}; scenarios ${[...SCENARIOS].join(',')}; ` +
      `${runCompare ? `${ROUNDS} rounds of ${compareSystems.join(', ')}; ` : ''}` +
      `${runEmbeddedScenario ? `${EMBEDDED_ROUNDS} embedded rounds; ` : ''}load ` +
      `average ${loadStart.join(' ')}`,
  );

  const env: Env = { natsUrl: nats.url, nc, receiver, db, embeddedDb, tmp, natsPid: nats.pid, redis: null };
  const scenarioEnv: ScenarioEnv = { tmp, receiver, natsUrl: nats.url, natsPid: nats.pid, nc, takeSeqs };

  const rounds: Round[] = [];
  const embeddedRounds: Round[] = [];
  let workers: WorkersResult | null = null;
  let burst: BurstResult | null = null;
  let ingest: IngestScenarioResult | null = null;
  let tenancy: TenancyResult | null = null;
  let recovery: RecoveryTenancyResult | null = null;
  let history: HistoryResult | null = null;
  let replicas: ReplicasResult | null = null;
  let ingestStream: IngestStreamResult | null = null;
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
    if (runCompare) {
      await attempt('comparison', async () => {
        if (compareSystems.includes('peer')) env.redis = await startRedis(path.join(tmp, 'redis'), path.join(tmp, 'redis.log'));
        try {
          const phases = { saturated: SCENARIOS.has('throughput'), paced: SCENARIOS.has('paced') };
          await runRounds(env, { name: 'compare', cases: CASES, phases, orgs }, compareSystems, ROUNDS, rounds);
        } finally {
          // not left running (idle but awake) during the scenarios that follow
          await env.redis?.stop();
        }
      });
    }
    if (runEmbeddedScenario) {
      await attempt('embedded', () =>
        runRounds(
          env,
          { name: 'embedded', cases: EMBEDDED_CASES, phases: { saturated: true, paced: true }, orgs: embeddedOrgs },
          embeddedSystems,
          EMBEDDED_ROUNDS,
          embeddedRounds,
        ),
      );
    }
    if (SCENARIOS.has('workers')) workers = await attempt('workers', () => runWorkersScenario(scenarioEnv));
    if (SCENARIOS.has('burst')) burst = await attempt('burst', () => runBurstScenario(scenarioEnv));
    if (SCENARIOS.has('ingest')) ingest = await attempt('ingest', () => runIngestScenario(scenarioEnv));
    if (SCENARIOS.has('ingest-stream')) ingestStream = await attempt('ingest-stream', () => runIngestStreamScenario(scenarioEnv));
    if (SCENARIOS.has('tenancy')) tenancy = await attempt('tenancy', () => runTenancyScenario(scenarioEnv));
    if (SCENARIOS.has('recovery')) recovery = await attempt('recovery', () => runRecoveryTenancyScenario(scenarioEnv));
    if (SCENARIOS.has('replicas')) replicas = await attempt('replicas', () => runReplicasScenario(scenarioEnv));
    if (SCENARIOS.has('history')) {
      history = await attempt('history', () => runHistoryScenario(scenarioEnv));
      if (history?.recovery_error) errors.push(`history recovery: ${history.recovery_error}`);
    }
  } finally {
    await closeProducers();
    await nc.drain().catch(() => {});
    await receiver.close();
    await env.redis?.stop();
    await nats.stop();
  }

  const pairs = pairReports(rounds, CASES, COMPARE_PAIRS);
  const svcFloor = pairs.find(([n]) => n === 'svc/baseline')?.[1] ?? null;
  const summary = summarise(rounds, CASES, compareSystems);
  const embeddedPairs = pairReports(embeddedRounds, EMBEDDED_CASES, EMBEDDED_PAIRS);
  const embeddedSummary = summarise(embeddedRounds, EMBEDDED_CASES, embeddedSystems);
  const result = {
    generated_at: new Date().toISOString(),
    wall_seconds: Math.round((Date.now() - started) / 1000),
    loadavg_at_start: loadStart,
    loadavg_at_end: os.loadavg().map((x) => Math.round(x * 100) / 100),
    machine: machine(),
    config: {
      scenarios: [...SCENARIOS],
      rounds: ROUNDS,
      systems: compareSystems,
      cases: CASES,
      window_deliveries: WINDOW_DELIVERIES,
      paced_kept_up_tail_ms: KEPT_UP_TAIL_MS,
      phase_time_limit_ms: PHASE_LIMIT_MS,
      max_in_flight_per_webhook: 8,
      connections_per_origin: 64,
      scale: SCALE,
      sizes: SIZES,
    },
    // svc over the floor, as before the peer existed (the same figures as comparison.pairs["svc/baseline"])
    ratios_median: svcFloor?.median ?? [],
    ratios_range: svcFloor?.range ?? [],
    ratios_per_round: svcFloor?.per_round ?? [],
    summary_median: summary,
    /** every ratio of the comparison: per round, median and range, per fan-out */
    comparison: { systems: compareSystems, pairs: Object.fromEntries(pairs) },
    rounds,
    embedded: runEmbeddedScenario
      ? {
          config: { rounds: EMBEDDED_ROUNDS, systems: embeddedSystems, cases: EMBEDDED_CASES, scale: SCALE * EMBEDDED_SCALE },
          pairs: Object.fromEntries(embeddedPairs),
          summary_median: embeddedSummary,
          rounds: embeddedRounds,
        }
      : null,
    workers,
    burst,
    ingest,
    ingest_stream: ingestStream,
    tenancy,
    recovery,
    replicas,
    history,
    error: errors.length ? errors.join('\n') : null,
  };
  fs.mkdirSync(RESULTS, { recursive: true });
  const file = path.join(RESULTS, 'latest.json');
  fs.writeFileSync(`${file}.tmp`, `${JSON.stringify(result, null, 2)}\n`);
  fs.renameSync(`${file}.tmp`, file);

  if (rounds.length) {
    process.stdout.write(
      `\nmedians over ${rounds.length} round(s); a/b rows are the median of the per-round ratios (lowest–highest round); "kept ` +
        `up" of a/b: rounds where both kept up; "all µs/del" adds nats-server and redis-server\n` +
        `${table(summary, CASES, compareSystems, pairs)}\n\n${ratioLines(pairs, summary)}\n`,
    );
  }
  if (embeddedRounds.length) {
    process.stdout.write(
      `\nembedded: svc without NATS (bench/embedded-svc.ts; the NATS bridge's cost is inside its figures), against the floor; ` +
        `medians over ${embeddedRounds.length} round(s)\n` +
        `${table(embeddedSummary, EMBEDDED_CASES, embeddedSystems, embeddedPairs)}\n\n${ratioLines(embeddedPairs, embeddedSummary)}\n`,
    );
  }
  const more = scenarioTables({ workers, burst, ingest, tenancy, recovery, replicas, history, ingestStream });
  if (more) process.stdout.write(`\n${more}\n`);
  process.stdout.write(
    `\nload average ${result.loadavg_at_start.join(' ')} at the start, ${result.loadavg_at_end.join(' ')} at the ` +
      `end\nresults: ${path.relative(ROOT, file)} (${result.wall_seconds} s)\n`,
  );
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
