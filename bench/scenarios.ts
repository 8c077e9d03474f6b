// The scenarios of issue 10 beyond the comparison of svc, the peer and the baseline (bench/run.ts runs them):
//
//   workers  svc serve --no-deliver + 1, then 2 `svc worker` processes against a receiver that
//            answers after 50 ms: deliveries/s of each and the ratio (scale-out of the data plane)
//   burst    10 events × 5 000 webhooks of one org, all sent at once, against a fast receiver:
//            duration, failures, peak RSS of the delivering process (svc serve and its threads)
//   ingest   acknowledged facts/s of svc serve --no-deliver with no webhooks, and of the baseline's
//            "answer at once" responder as the ceiling, interleaved
//   tenancy  org B's paced deliveries to a fast receiver, alone and beside org A's webhooks that
//            never answer (a tarpit holding each attempt for the whole delivery timeout): B's
//            latency p50/p99 with A over without A (CONTRACT 8: at most 1 s more)
//   recovery (issue 27) org B's paced deliveries to a fast webhook, alone and then beside org A's
//            recoveries of 20 000 events into 4 webhooks that never answer, started as often as A's
//            limits allow (4 running per org; the calls past them answer 409): B's p50/p99/max
//   history  (issue 18) the same delivered workload against svc serve --event-retention 0 and with
//            the default 7d, interleaved: facts/s, deliveries/s and the ratio kept/none; then a
//            recovery of 100 000 events missed by one webhook (its receiver answered 503) to the
//            same receiver answering 200: events/s
//
// Each scenario has its own nats-server and SQLite file, so that no stream, consumer, registry or
// data plane key of one svc instance is seen by the next.
import http from 'node:http';
import path from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { DISPATCH_CONSUMER, EVENTS_STREAM } from '../src/bus/nats/jetstream.ts';
import {
  closeProducersOf,
  cpuSnapshot,
  listenOnLoopback,
  runIngestPhase,
  runPhase,
  sampleRss,
  seqOf,
  startBenchReceiver,
  svcCpuPids,
  type BenchReceiver,
  type CpuPids,
  type IngestResult,
  type PhaseResult,
} from './harness.ts';
import {
  awaitOutcomes,
  createSvcOrg,
  createWebhooks,
  dataplaneKey,
  log,
  sleep,
  spawnChild,
  startNats,
  startSvcServe,
  startSvcWorker,
  stopChild,
  svcCounters,
  warnings,
  type Child,
  type Nats,
  type OrgAuth,
  type Svc,
  type SvcCounters,
} from './procs.ts';

const num = (name: string, dflt: number, min = 1) => {
  const v = Number(process.env[name] ?? dflt);
  return Number.isFinite(v) && v >= min ? v : dflt;
};

/** Sizes of the scenarios (environment knobs; see BENCHMARKS.md). */
export const SIZES = {
  workers: {
    webhooks: Math.round(num('BENCH_WORKERS_WEBHOOKS', 16)),
    concurrency: Math.round(num('BENCH_WORKERS_CONCURRENCY', 64)),
    delay_ms: num('BENCH_WORKERS_DELAY_MS', 50, 0),
    /** after every worker is ready, this long before the window opens */
    settle_s: num('BENCH_WORKERS_SETTLE_S', 1, 0),
    /** deliveries are counted in a window of this length */
    window_s: num('BENCH_WORKERS_SECONDS', 5),
  },
  burst: {
    webhooks: Math.round(num('BENCH_BURST_WEBHOOKS', 5000)),
    events: Math.round(num('BENCH_BURST_EVENTS', 10)),
    /** webhook creation requests at a time */
    create_parallel: Math.round(num('BENCH_BURST_CREATE_PARALLEL', 32)),
  },
  tenancy: {
    /** org A: webhooks whose receiver never answers */
    tarpit_webhooks: Math.round(num('BENCH_TENANCY_TARPITS', 40)),
    /** org A: events sent at the start of the phase with A, and then per second */
    tarpit_events: Math.round(num('BENCH_TENANCY_TARPIT_EVENTS', 20)),
    tarpit_events_per_sec: num('BENCH_TENANCY_TARPIT_RATE', 10, 0),
    /** org B: webhooks at the fast receiver, facts/s, seconds per measurement */
    webhooks: Math.round(num('BENCH_TENANCY_WEBHOOKS', 4)),
    rate: num('BENCH_TENANCY_RATE', 100),
    seconds: num('BENCH_TENANCY_SECONDS', 8),
  },
  recovery_tenancy: {
    /** org A: events emitted (before its webhooks exist) and then recovered into each webhook */
    events: Math.round(num('BENCH_RECOVERY_TENANCY_EVENTS', 20_000)),
    /** org A: webhooks whose receiver never answers, one recovery each (the org's limit is 4) */
    tarpit_webhooks: Math.round(num('BENCH_RECOVERY_TENANCY_TARPITS', 4)),
    /** org B: facts/s to its one fast webhook (the case is 1/s; 10/s gives 200 samples in 20 s), seconds per measurement */
    rate: num('BENCH_RECOVERY_TENANCY_RATE', 10),
    seconds: num('BENCH_RECOVERY_TENANCY_SECONDS', 20),
    /** org A calls recover on each of its webhooks this often during B's phase beside it */
    retry_ms: num('BENCH_RECOVERY_TENANCY_RETRY_MS', 1000, 50),
  },
  history: {
    /** interleaved measurements of each side (the comparison's BENCH_ROUNDS) */
    rounds: Math.round(num('BENCH_ROUNDS', 3)),
    /** webhooks (all events) of the cost measurement, and facts per measurement */
    fanout: Math.round(num('BENCH_HISTORY_FANOUT', 10)),
    facts: Math.round(num('BENCH_HISTORY_FACTS', 2500)),
    warmup_facts: Math.round(num('BENCH_HISTORY_WARMUP_FACTS', 300)),
    /** events the recovery sends again to its one webhook */
    recovery_events: Math.round(num('BENCH_RECOVERY_EVENTS', 100_000)),
    /**
     * how the webhook missed them: `failing` (it exists and its receiver answers 503, so each event's
     * own attempt fails, one at a time once the breaker is open) or `absent` (created after them, so
     * they are emitted at ingest speed and it never had them)
     */
    recovery_missed: process.env.BENCH_RECOVERY_MISSED === 'absent' ? ('absent' as const) : ('failing' as const),
  },
  ingest: {
    facts: Math.round(num('BENCH_INGEST_FACTS', 20_000)),
    window: Math.round(num('BENCH_INGEST_WINDOW', 1000)),
    rounds: Math.round(num('BENCH_INGEST_ROUNDS', 2)),
    warmup_facts: 2000,
  },
};

export interface ScenarioEnv {
  tmp: string;
  /** the fast receiver (answers 204 at once) */
  receiver: BenchReceiver;
  /** the comparison's nats-server: nothing else answers svc.ingest.> on it between rounds */
  natsUrl: string;
  natsPid: number | null;
  nc: NatsConnection;
  takeSeqs(n: number): number;
}

function cpuDelta(
  a: Record<string, number | null>,
  b: Record<string, number | null>,
  per: number,
): { cpu_ms: Record<string, number | null>; cpu_us_per_delivery: Record<string, number | null> } {
  const cpu_ms: Record<string, number | null> = {};
  const cpu_us_per_delivery: Record<string, number | null> = {};
  for (const k of Object.keys(b)) {
    const d = a[k] !== null && a[k] !== undefined && b[k] !== null ? Math.round((b[k] as number) - (a[k] as number)) : null;
    cpu_ms[k] = d;
    cpu_us_per_delivery[k] = d !== null && per > 0 ? Math.round((d * 1000) / per) : null;
  }
  return { cpu_ms, cpu_us_per_delivery };
}

/** Hop messages (batches of events) in SVC_EVENTS not yet given to a data plane. */
async function pendingMessages(jsm: JetStreamManager): Promise<number> {
  return (await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER)).num_pending;
}

async function lastStreamSeq(jsm: JetStreamManager): Promise<number> {
  return (await jsm.streams.info(EVENTS_STREAM)).state.last_seq;
}

// ------------------------------------------------------------------------------- workers

export interface WorkersRun {
  workers: number;
  /** deliveries received in the window / its length */
  deliveries_per_sec: number;
  /** workers × concurrency / receiver delay: what the in-flight bound allows at most */
  bound_deliveries_per_sec: number;
  /** deliveries_per_sec / bound */
  of_bound: number;
  window_ms: number;
  deliveries_in_window: number;
  /** hop messages not yet given to a worker when the window closed (0: the workers hold the rest, or ran dry) */
  backlog_messages_after: number;
  backlog_messages_before: number;
  cpu_ms: Record<string, number | null>;
  cpu_us_per_delivery: Record<string, number | null>;
  worker_warnings: number;
}

export interface WorkersResult {
  config: (typeof SIZES)['workers'] & { fanout: number };
  runs: WorkersRun[];
  /** two workers / one worker */
  scale_ratio: number | null;
  svc_counters: SvcCounters | null;
  serve_warnings: number;
}

/**
 * Scale-out of the data plane. The engine (`svc serve --no-deliver`) fills the durable queue with a
 * backlog before the workers start, so that during the measured window the workers never wait for
 * events and the engine does nothing but take outcomes; then deliveries are counted in a fixed
 * window once every worker is up. The receiver answers after 50 ms, so a worker with N attempts in
 * flight delivers at most N / 50 ms whatever its CPU.
 */
export async function runWorkersScenario(env: ScenarioEnv): Promise<WorkersResult> {
  const S = SIZES.workers;
  const fanout = S.webhooks; // every webhook matches every event (all_events)
  const nats = await startNats();
  const slow = await startBenchReceiver({ delayMs: S.delay_ms });
  const db = path.join(env.tmp, 'workers.db');
  const org = createSvcOrg(db, 'bench-workers');
  const serve = await startSvcServe({ natsUrl: nats.url, db, logFile: path.join(env.tmp, 'workers-serve.log'), extra: ['--no-deliver'] });
  const nc = await connect({ servers: nats.url, name: 'bench-workers', noAsyncTraces: true });
  const runs: WorkersRun[] = [];
  let counters: SvcCounters | null = null;
  try {
    await createWebhooks(
      serve.url,
      org,
      Array.from({ length: S.webhooks }, (_, i) => `${slow.url}/w/${i}`),
      4,
    );
    const key = dataplaneKey(db);
    const jsm = await jetstreamManager(nc);
    for (const n of [1, 2]) {
      const bound = (n * S.concurrency * 1000) / Math.max(1, S.delay_ms);
      // the backlog, added for each n on top of what is left: what n workers deliver in settle +
      // window, with half again as margin, and 300 events more each. (A worker takes events in whole
      // hop batches and may park up to its share of its pipeline's window: the first to pull can take
      // a backlog this size, and gives back batches parked for 0.5 s, where the other's pull takes
      // them: BENCHMARKS.md "Issue 33, step 3".)
      const add = Math.ceil((bound * (S.settle_s + S.window_s) * 1.5) / fanout) + n * 300;
      const r = await runIngestPhase(nc, {
        name: `workers backlog ${n}`,
        orgId: org.org_id,
        facts: add,
        firstSeq: env.takeSeqs(add),
        window: 500,
        timeLimitMs: 60_000,
      });
      if (r.errors) throw new Error(`workers: ${r.errors} of ${add} backlog facts were refused`);
      // committed once answered; published once the stream stops growing (the relay caught up)
      const until = Date.now() + 20_000;
      for (let last = -1, seq = await lastStreamSeq(jsm); seq !== last && Date.now() < until; seq = await lastStreamSeq(jsm)) {
        last = seq;
        await sleep(300);
      }
      const pending = await pendingMessages(jsm);
      const times: number[] = [];
      slow.sink = { record: (_seq, at) => void times.push(at) };
      const workers: Child[] = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          startSvcWorker({ natsUrl: nats.url, key, concurrency: S.concurrency, logFile: path.join(env.tmp, `worker-${n}-${i}.log`) }),
        ),
      );
      let run: WorkersRun | null = null;
      try {
        await sleep(S.settle_s * 1000);
        const pids: CpuPids = { engine: serve.pid, nats: nats.pid };
        workers.forEach((w, i) => (pids[`worker${i + 1}`] = w.pid));
        const c0 = cpuSnapshot(pids);
        const a = performance.now();
        await sleep(S.window_s * 1000);
        const b = performance.now();
        const c1 = cpuSnapshot(pids);
        const after = await pendingMessages(jsm);
        const inWindow = times.filter((t) => t >= a && t < b).length;
        const rate = Math.round((inWindow / (b - a)) * 1000);
        run = {
          workers: n,
          deliveries_per_sec: rate,
          bound_deliveries_per_sec: Math.round(bound),
          of_bound: Math.round((rate / bound) * 1000) / 1000,
          window_ms: Math.round(b - a),
          deliveries_in_window: inWindow,
          backlog_messages_before: pending,
          backlog_messages_after: after,
          ...cpuDelta(c0, c1, inWindow),
          worker_warnings: 0,
        };
        runs.push(run);
        log(
          `workers ×${n}: ${rate} deliveries/s (${Math.round((rate / bound) * 100)} % of ${n} × ${S.concurrency} in flight ` +
            `/ ${S.delay_ms} ms); backlog ${pending} → ${after} hop messages not yet taken`,
        );
      } finally {
        slow.sink = null;
        await Promise.all(workers.map((w) => stopChild(w.child)));
        if (run) run.worker_warnings = workers.reduce((k, w) => k + warnings(w.lines).length, 0);
      }
    }
    counters = await svcCounters(serve.url);
  } finally {
    await nc.drain().catch(() => {});
    await stopChild(serve.child);
    await slow.close();
    await nats.stop();
  }
  const one = runs.find((r) => r.workers === 1);
  const two = runs.find((r) => r.workers === 2);
  return {
    config: { ...S, fanout },
    runs,
    scale_ratio:
      one && two && one.deliveries_per_sec > 0 ? Math.round((two.deliveries_per_sec / one.deliveries_per_sec) * 1000) / 1000 : null,
    svc_counters: counters,
    serve_warnings: warnings(serve.lines).length,
  };
}

// ------------------------------------------------------------------------------- burst

export interface BurstResult {
  config: (typeof SIZES)['burst'];
  /** svc serve's delivery, from its `listening on` line (e.g. "1 threads") */
  delivery: string | null;
  webhooks_create_ms: number;
  /** one event to every webhook before the burst (retried while the data plane's registry is incomplete) */
  warmup: Array<Pick<PhaseResult, 'deliveries' | 'deliveries_expected' | 'duration_ms'>>;
  burst: PhaseResult;
  deliveries_expected: number;
  /** expected − received at the receiver (missing), plus duplicates */
  receiver_failures: number;
  /** svc_deliveries_total{outcome="failure"} counted during the burst */
  svc_failures: number | null;
  svc_successes: number | null;
  /** VmRSS of svc serve (its delivery threads included), MiB: before, peak and at the end of the burst; VmHWM */
  rss: ReturnType<ReturnType<typeof sampleRss>['stop']>;
  serve_warnings: number;
  warning_examples: string[];
}

/** 10 events × 5 000 webhooks of one org, sent at once: svc serve with its default delivery threads. */
export async function runBurstScenario(env: ScenarioEnv): Promise<BurstResult> {
  const S = SIZES.burst;
  const nats = await startNats();
  const db = path.join(env.tmp, 'burst.db');
  const org = createSvcOrg(db, 'bench-burst');
  const serve = await startSvcServe({ natsUrl: nats.url, db, logFile: path.join(env.tmp, 'burst-serve.log') });
  const nc = await connect({ servers: nats.url, name: 'bench-burst', noAsyncTraces: true });
  try {
    const t0 = performance.now();
    await createWebhooks(
      serve.url,
      org,
      Array.from({ length: S.webhooks }, (_, i) => `${env.receiver.url}/b/${i}`),
      S.create_parallel,
    );
    const createMs = Math.round(performance.now() - t0);
    log(`burst: ${S.webhooks} webhooks created in ${createMs} ms`);
    const common = { orgId: org.org_id, fanout: S.webhooks, drainMs: 3000 };
    const warmup: BurstResult['warmup'] = [];
    for (let i = 0; i < 3; i++) {
      const w = await runPhase(nc, env.receiver, {
        ...common,
        name: 'burst warm-up',
        events: 1,
        firstSeq: env.takeSeqs(1),
        window: 1,
        timeLimitMs: 30_000,
      });
      warmup.push({ deliveries: w.deliveries, deliveries_expected: w.deliveries_expected, duration_ms: w.duration_ms });
      log(`burst warm-up: ${w.deliveries}/${w.deliveries_expected} deliveries in ${w.duration_ms} ms`);
      if (w.deliveries === w.deliveries_expected) break;
      await sleep(1000);
    }
    // every warm-up outcome counted before the burst's own are
    const warmed = warmup.reduce((k, w) => k + w.deliveries, 0);
    const zero: SvcCounters = {
      deliveries_success: 0,
      deliveries_failure: 0,
      ingest_accepted: 0,
      events_dropped: 0,
      hop_events_per_message: null,
    };
    const before = await awaitOutcomes(serve.url, zero, warmed, 10_000);
    await sleep(300);
    const rss = sampleRss(serve.pid, 10);
    const burst = await runPhase(nc, env.receiver, {
      ...common,
      name: 'burst',
      events: S.events,
      firstSeq: env.takeSeqs(S.events),
      window: S.events,
      timeLimitMs: 120_000,
      drainMs: 10_000,
      cpuPids: { sut: serve.pid, nats: nats.pid },
    });
    const mem = rss.stop();
    const expected = S.events * S.webhooks;
    const after = await awaitOutcomes(serve.url, before, expected, 10_000);
    const w = warnings(serve.lines);
    log(
      `burst: ${burst.deliveries}/${expected} deliveries in ${burst.duration_ms} ms (${burst.deliveries_per_sec}/s); ` +
        `svc failures ${after.deliveries_failure - before.deliveries_failure}; RSS ${mem.start_mib} → peak ${mem.peak_mib} MiB`,
    );
    return {
      config: S,
      delivery: /"delivery":"([^"]*)"/.exec(serve.line)?.[1] ?? null,
      webhooks_create_ms: createMs,
      warmup,
      burst,
      deliveries_expected: expected,
      receiver_failures: burst.missing + burst.duplicates,
      svc_failures: after.deliveries_failure - before.deliveries_failure,
      svc_successes: after.deliveries_success - before.deliveries_success,
      rss: mem,
      serve_warnings: w.length,
      warning_examples: w.slice(0, 3).map((l) => l.slice(0, 300)),
    };
  } finally {
    await nc.drain().catch(() => {});
    await stopChild(serve.child);
    await nats.stop();
  }
}

// ------------------------------------------------------------------------------- ingest

export interface IngestScenarioResult {
  config: (typeof SIZES)['ingest'];
  rounds: Array<{ baseline: IngestResult; svc: IngestResult; ratio: number | null }>;
  median: { baseline_facts_per_sec: number | null; svc_facts_per_sec: number | null; ratio: number | null };
  svc_ingest_accepted: number | null;
  serve_warnings: number;
}

const median = (v: number[]) => {
  const s = v.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return null;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/**
 * Ingest alone: svc serve --no-deliver on its own nats-server (no webhooks; the events pile up in
 * the stream), and the baseline on the comparison's nats-server, both running the whole time and
 * measured in turn (baseline, svc, baseline, svc, …) with the same closed-loop producer.
 */
export async function runIngestScenario(env: ScenarioEnv): Promise<IngestScenarioResult> {
  const S = SIZES.ingest;
  const nats = await startNats();
  const db = path.join(env.tmp, 'ingest.db');
  const org = createSvcOrg(db, 'bench-ingest');
  const serve = await startSvcServe({ natsUrl: nats.url, db, logFile: path.join(env.tmp, 'ingest-serve.log'), extra: ['--no-deliver'] });
  let base: Child | null = null;
  const nc = await connect({ servers: nats.url, name: 'bench-ingest', noAsyncTraces: true });
  const rounds: IngestScenarioResult['rounds'] = [];
  let accepted: number | null = null;
  try {
    base = await spawnChild(
      'baseline',
      ['--import', 'tsx', 'bench/baseline.ts'],
      { BENCH_NATS_URL: env.natsUrl, BENCH_TARGETS: '{}' },
      (l) => l.trim() === 'ready',
      path.join(env.tmp, 'ingest-baseline.log'),
    );
    const phase = (c: NatsConnection, name: string, facts: number, pids: CpuPids) =>
      runIngestPhase(c, {
        name,
        orgId: org.org_id,
        facts,
        firstSeq: env.takeSeqs(facts),
        window: S.window,
        timeLimitMs: 60_000,
        cpuPids: pids,
      });
    const basePids = { sut: base.pid, nats: env.natsPid };
    const svcPids = svcCpuPids(serve.pid, nats.pid);
    await phase(env.nc, 'baseline ingest warm-up', S.warmup_facts, basePids);
    await phase(nc, 'svc ingest warm-up', S.warmup_facts, svcPids);
    for (let r = 1; r <= S.rounds; r++) {
      await sleep(300);
      const b = await phase(env.nc, `baseline ingest ${r}`, S.facts, basePids);
      await sleep(300);
      const s = await phase(nc, `svc ingest ${r}`, S.facts, svcPids);
      const ratio = b.facts_per_sec > 0 ? Math.round((s.facts_per_sec / b.facts_per_sec) * 1000) / 1000 : null;
      rounds.push({ baseline: b, svc: s, ratio });
      log(
        `ingest round ${r}: baseline ${b.facts_per_sec} facts/s (${b.facts_acked}/${S.facts}), svc ${s.facts_per_sec} facts/s ` +
          `(${s.facts_acked}/${S.facts}, ` +
          `ack p50 ${s.ack_ms.p50} p99 ${s.ack_ms.p99} ms, ${s.errors} errors): ${ratio}x`,
      );
    }
    accepted = (await svcCounters(serve.url)).ingest_accepted;
  } finally {
    await nc.drain().catch(() => {});
    if (base) await stopChild(base.child);
    await stopChild(serve.child);
    await nats.stop();
  }
  return {
    config: S,
    rounds,
    median: {
      baseline_facts_per_sec: median(rounds.map((r) => r.baseline.facts_per_sec)),
      svc_facts_per_sec: median(rounds.map((r) => r.svc.facts_per_sec)),
      ratio: median(rounds.map((r) => r.ratio ?? NaN)),
    },
    svc_ingest_accepted: accepted,
    serve_warnings: warnings(serve.lines).length,
  };
}

// ------------------------------------------------------------------------------- tenancy

export interface TenancyResult {
  config: (typeof SIZES)['tenancy'];
  /** B alone */
  alone: PhaseResult;
  /** B while A's tarpit attempts are under way */
  beside: PhaseResult;
  /** A's attempts that reached the tarpit during B's phase beside it (A really held slots) */
  tarpit_attempts: number;
  ratio: { p50: number | null; p99: number | null; max: number | null };
  /** how much later B's slowest delivery came beside A, ms (CONTRACT 8: at most 1 000) */
  added_max_ms: number;
  serve_warnings: number;
}

/** An HTTP server that reads each request and never answers; close() drops every connection. */
async function startTarpit(): Promise<{ url: string; requests: () => number; close(): Promise<void> }> {
  let requests = 0;
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req) => {
    req.on('data', () => {});
    req.on('end', () => void requests++);
  });
  server.headersTimeout = 0;
  server.requestTimeout = 0;
  return { ...(await listenOnLoopback(server)), requests: () => requests };
}

/**
 * Two orgs on one svc serve (default delivery threads and concurrency): B's paced load alone, then
 * again while A keeps its tarpit webhooks busy (events sent before and during B's phase, each
 * attempt held for the whole delivery timeout).
 */
export async function runTenancyScenario(env: ScenarioEnv): Promise<TenancyResult> {
  const S = SIZES.tenancy;
  const nats = await startNats();
  const tarpit = await startTarpit();
  const db = path.join(env.tmp, 'tenancy.db');
  const a = createSvcOrg(db, 'bench-tenancy-a');
  const b = createSvcOrg(db, 'bench-tenancy-b');
  const serve = await startSvcServe({ natsUrl: nats.url, db, logFile: path.join(env.tmp, 'tenancy-serve.log') });
  const nc = await connect({ servers: nats.url, name: 'bench-tenancy', noAsyncTraces: true });
  let flood: NodeJS.Timeout | null = null;
  try {
    await createWebhooks(
      serve.url,
      a,
      Array.from({ length: S.tarpit_webhooks }, (_, i) => `${tarpit.url}/a/${i}`),
      4,
    );
    await createWebhooks(
      serve.url,
      b,
      Array.from({ length: S.webhooks }, (_, i) => `${env.receiver.url}/b/${i}`),
      4,
    );
    const events = Math.max(1, Math.round(S.rate * S.seconds));
    const phase = (name: string) =>
      runPhase(nc, env.receiver, {
        name,
        orgId: b.org_id,
        fanout: S.webhooks,
        events,
        firstSeq: env.takeSeqs(events),
        ratePerSec: S.rate,
        timeLimitMs: S.seconds * 1000 + 30_000,
        drainMs: 10_000,
      });
    // warm-up: every webhook of B in the data plane's registry, connections open
    await runPhase(nc, env.receiver, {
      name: 'tenancy warm-up',
      orgId: b.org_id,
      fanout: S.webhooks,
      events: 50,
      firstSeq: env.takeSeqs(50),
      window: 10,
      timeLimitMs: 30_000,
      drainMs: 3000,
    });
    const alone = await phase('tenancy B alone');
    log(
      `tenancy: B alone ${alone.deliveries}/${alone.deliveries_expected}, latency p50 ${alone.latency_ms.p50} ` +
        `p99 ${alone.latency_ms.p99} max ${alone.latency_ms.max} ms`,
    );

    // A: a first batch, then a steady trickle for as long as B's phase lasts
    const sendA = (n: number) =>
      runIngestPhase(nc, { name: 'tenancy A', orgId: a.org_id, facts: n, firstSeq: env.takeSeqs(n), window: n, timeLimitMs: 30_000 });
    await sendA(S.tarpit_events);
    const t0 = tarpit.requests();
    const until = Date.now() + 20_000;
    while (
      tarpit.requests() - t0 < Math.min(S.tarpit_webhooks * 8, 200) &&
      tarpit.requests() < S.tarpit_events * S.tarpit_webhooks &&
      Date.now() < until
    )
      await sleep(50);
    if (S.tarpit_events_per_sec > 0) {
      flood = setInterval(() => void sendA(Math.max(1, Math.round(S.tarpit_events_per_sec / 10))).catch(() => {}), 100);
    }
    const held0 = tarpit.requests();
    const beside = await phase('tenancy B beside A');
    const held = tarpit.requests() - held0;
    log(
      `tenancy: B beside A ${beside.deliveries}/${beside.deliveries_expected}, latency p50 ${beside.latency_ms.p50} ` +
        `p99 ${beside.latency_ms.p99} max ${beside.latency_ms.max} ms; A's attempts at the tarpit meanwhile ${held}`,
    );
    const r = (x: number, y: number) => (y > 0 ? Math.round((x / y) * 100) / 100 : null);
    return {
      config: S,
      alone,
      beside,
      tarpit_attempts: held,
      ratio: {
        p50: r(beside.latency_ms.p50, alone.latency_ms.p50),
        p99: r(beside.latency_ms.p99, alone.latency_ms.p99),
        max: r(beside.latency_ms.max, alone.latency_ms.max),
      },
      added_max_ms: Math.round(beside.latency_ms.max - alone.latency_ms.max),
      serve_warnings: warnings(serve.lines).length,
    };
  } finally {
    if (flood) clearInterval(flood);
    await nc.drain().catch(() => {});
    await tarpit.close();
    await stopChild(serve.child);
    await nats.stop();
  }
}

// ------------------------------------------------------------------------------- recovery beside another org (issue 27)

export interface RecoveryTenancyResult {
  config: (typeof SIZES)['recovery_tenancy'];
  /** A's facts committed (before its webhooks existed) */
  emit: IngestResult;
  /** B alone */
  alone: PhaseResult;
  /** B while A's recoveries run */
  beside: PhaseResult;
  /** A's recover calls: 202 (started), 409 by code (conflict: one running on that webhook; limit_exceeded: 4 per org), others */
  recover_calls: { started: number; conflict: number; limit_exceeded: number; other: number };
  /** the first 202's `events` (what one recovery set out to attempt) */
  recovery_events: number | null;
  /** A's attempts that reached the tarpit during B's phase beside it */
  tarpit_attempts: number;
  /** the recoveries' `attempted` (GET …/recoveries/{id}) summed, at the start and at the end of B's phase beside them */
  recovery_attempted: { at_start: number; at_end: number };
  ratio: { p50: number | null; p99: number | null; max: number | null };
  added_max_ms: number;
  serve_warnings: number;
}

/**
 * Org A's recoveries beside org B on one svc serve (NATS mode, default delivery threads): A's
 * events emitted before its webhooks exist (the recoveries backfill them), webhooks at a tarpit;
 * B's paced load alone, then A starts a recovery on each of its webhooks (202 up to its limits, 409
 * past them) and keeps trying every retry_ms while B's load runs again.
 */
export async function runRecoveryTenancyScenario(env: ScenarioEnv): Promise<RecoveryTenancyResult> {
  const S = SIZES.recovery_tenancy;
  const nats = await startNats();
  const tarpit = await startTarpit();
  const db = path.join(env.tmp, 'recovery-tenancy.db');
  const a = createSvcOrg(db, 'bench-recovery-tenancy-a');
  const b = createSvcOrg(db, 'bench-recovery-tenancy-b');
  const serve = await startSvcServe({ natsUrl: nats.url, db, logFile: path.join(env.tmp, 'recovery-tenancy-serve.log') });
  const nc = await connect({ servers: nats.url, name: 'bench-recovery-tenancy', noAsyncTraces: true });
  let retry: NodeJS.Timeout | null = null;
  try {
    await createWebhooks(serve.url, b, [`${env.receiver.url}/rb/0`], 1);
    // A's events, emitted while A has no webhook (so none is attempted but by the recoveries)
    const emit = await runIngestPhase(nc, {
      name: 'recovery tenancy A emit',
      orgId: a.org_id,
      facts: S.events,
      firstSeq: env.takeSeqs(S.events),
      window: 1000,
      timeLimitMs: Math.max(120_000, S.events * 2),
    });
    if (emit.facts_acked < S.events)
      throw new Error(`recovery tenancy: ${emit.facts_acked} of ${S.events} of A's facts acknowledged (${emit.errors} errors)`);
    const jsm = await jetstreamManager(nc);
    const until = Date.now() + 120_000;
    for (;;) {
      const info = await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER);
      if (info.num_pending + info.num_ack_pending === 0) break;
      if (Date.now() > until)
        throw new Error(`recovery tenancy: ${info.num_pending + info.num_ack_pending} events still queued 120 s after they were emitted`);
      await sleep(100);
    }
    log(`recovery tenancy: A's ${S.events} facts committed at ${emit.facts_per_sec}/s`);
    const aHooks: string[] = [];
    for (let i = 0; i < S.tarpit_webhooks; i++) {
      const hook = await apiJson(
        serve.url,
        a,
        'POST',
        '/v1/orgs/current/webhooks',
        { webhook_url: `${tarpit.url}/ra/${i}`, secret: `whsec_bench_ra_${i}`, interests: { all_events: true } },
        201,
      );
      aHooks.push(String(hook.webhook_id));
    }

    const events = Math.max(1, Math.round(S.rate * S.seconds));
    const phase = (name: string) =>
      runPhase(nc, env.receiver, {
        name,
        orgId: b.org_id,
        fanout: 1,
        events,
        firstSeq: env.takeSeqs(events),
        ratePerSec: S.rate,
        timeLimitMs: S.seconds * 1000 + 30_000,
        drainMs: 10_000,
      });
    await runPhase(nc, env.receiver, {
      name: 'recovery tenancy warm-up',
      orgId: b.org_id,
      fanout: 1,
      events: 20,
      firstSeq: env.takeSeqs(20),
      window: 5,
      timeLimitMs: 30_000,
      drainMs: 3000,
    });
    const alone = await phase('recovery tenancy B alone');
    log(
      `recovery tenancy: B alone ${alone.deliveries}/${alone.deliveries_expected}, latency p50 ${alone.latency_ms.p50} ` +
        `p99 ${alone.latency_ms.p99} max ${alone.latency_ms.max} ms`,
    );

    // A recovers into every webhook as often as it may
    const calls = { started: 0, conflict: 0, limit_exceeded: 0, other: 0 };
    const recoveries: Array<{ hook: string; id: string }> = [];
    let recoveryEvents: number | null = null;
    const recoverAll = async () => {
      for (const w of aHooks) {
        const res = await fetch(`${serve.url}/v1/orgs/current/webhooks/${w}/recover`, {
          method: 'POST',
          headers: { authorization: `Bearer ${a.api_token}`, 'x-svc-org-id': a.org_id, 'content-type': 'application/json' },
          body: JSON.stringify({ since: '2h', only_failed: false, backfill: true }),
        });
        const text = await res.text();
        if (res.status === 202) {
          calls.started++;
          const body = JSON.parse(text) as Record<string, unknown>;
          recoveries.push({ hook: w, id: String(body.recovery_id) });
          recoveryEvents ??= Number(body.events);
        } else if (res.status === 409) {
          let code: unknown = null;
          try {
            code = (JSON.parse(text) as { error?: unknown }).error;
          } catch {
            code = null;
          }
          if (code === 'conflict') calls.conflict++;
          else if (code === 'limit_exceeded') calls.limit_exceeded++;
          else calls.other++;
        } else {
          calls.other++;
          log(`recovery tenancy: recover answered ${res.status} ${text.slice(0, 200)}`);
        }
      }
    };
    const attempted = async () => {
      let n = 0;
      for (const r of recoveries) {
        const st = await apiJson(serve.url, a, 'GET', `/v1/orgs/current/webhooks/${r.hook}/recoveries/${r.id}`, undefined, 200);
        n += Number(st.attempted ?? 0);
      }
      return n;
    };
    await recoverAll();
    if (calls.started === 0) throw new Error('recovery tenancy: no recovery started');
    log(
      `recovery tenancy: A's recoveries ${calls.started} started (${recoveryEvents} events ` +
        `each), ${calls.conflict + calls.limit_exceeded} refused (409)`,
    );
    // the recoveries under way: their first attempts held at the tarpit
    const t0 = tarpit.requests();
    const waitUntil = Date.now() + 20_000;
    while (tarpit.requests() - t0 < calls.started && Date.now() < waitUntil) await sleep(50);
    let busy = false;
    retry = setInterval(() => {
      if (busy) return;
      busy = true;
      void recoverAll()
        .catch(() => {})
        .finally(() => (busy = false));
    }, S.retry_ms);
    const held0 = tarpit.requests();
    const attempted0 = await attempted();
    const beside = await phase('recovery tenancy B beside A');
    const held = tarpit.requests() - held0;
    clearInterval(retry);
    retry = null;
    while (busy) await sleep(20);
    const attempted1 = await attempted();
    log(
      `recovery tenancy: B beside A ${beside.deliveries}/${beside.deliveries_expected}, latency p50 ${beside.latency_ms.p50} ` +
        `p99 ${beside.latency_ms.p99} max ${beside.latency_ms.max} ms; ` +
        `A's attempts at the tarpit meanwhile ${held}, recoveries' attempted ${attempted0} → ${attempted1}; recover ` +
        `calls ${JSON.stringify(calls)}`,
    );
    const r = (x: number, y: number) => (y > 0 ? Math.round((x / y) * 100) / 100 : null);
    return {
      config: S,
      emit,
      alone,
      beside,
      recover_calls: calls,
      recovery_events: recoveryEvents,
      tarpit_attempts: held,
      recovery_attempted: { at_start: attempted0, at_end: attempted1 },
      ratio: {
        p50: r(beside.latency_ms.p50, alone.latency_ms.p50),
        p99: r(beside.latency_ms.p99, alone.latency_ms.p99),
        max: r(beside.latency_ms.max, alone.latency_ms.max),
      },
      added_max_ms: Math.round(beside.latency_ms.max - alone.latency_ms.max),
      serve_warnings: warnings(serve.lines).length,
    };
  } finally {
    if (retry) clearInterval(retry);
    await closeProducersOf(nc);
    await nc.drain().catch(() => {});
    await tarpit.close();
    await stopChild(serve.child);
    await nats.stop();
  }
}

// ------------------------------------------------------------------------------- history (issue 18)

export interface HistoryRound {
  /** which side was measured first in this round (they alternate) */
  order: Array<'none' | 'kept'>;
  /** svc serve --event-retention 0 */
  none: PhaseResult;
  /** svc serve with the default --event-retention (7d) */
  kept: PhaseResult;
  /** kept / none */
  ratio: {
    facts_per_sec: number | null;
    deliveries_per_sec: number | null;
    steady_deliveries_per_sec: number | null;
    sut_cpu_per_delivery: number | null;
  };
}

export interface RecoveryResult {
  /** how the webhook missed the events (BENCH_RECOVERY_MISSED) */
  missed: 'failing' | 'absent';
  /** events emitted while the receiver answered 503 (or before the webhook existed) */
  events: number;
  /** the 202's `events`: what the recovery set out to attempt */
  recovery_events: number;
  emit: {
    ingest: IngestResult;
    /** 503s the receiver answered (each event's own attempt; 0 when the webhook was absent) */
    failed_attempts: number;
    /** first send → the last event's own attempt at the receiver (absent: → the last fact committed) */
    duration_ms: number;
    attempts_per_sec: number;
    /** svc_deliveries_total{outcome="failure"} counted meanwhile */
    svc_failures: number;
  };
  /** POST …/recover sent → its 202 (the recovery's items are all queued when it answers) */
  request_ms: number;
  /** POST sent → the receiver has every event (the primary figure), and 202 → the same */
  received_ms: number;
  received_ms_after_202: number;
  /** POST sent → GET …/recoveries/{id} says `done`, and 202 → the same (progress is written about once a second) */
  done_ms: number;
  done_ms_after_202: number;
  /** events / received_ms: the headline figure */
  events_per_sec: number;
  events_per_sec_after_202: number;
  events_per_sec_done: number;
  /** distinct events received (of recovery_events), repeats, deliveries without this recovery's X-Svc-Recovery */
  received: number;
  duplicates: number;
  without_header: number;
  /** the recovery as GET …/recoveries/{id} last reported it */
  final: { state: string; events: number; attempted: number; succeeded: number; failed: number } | null;
  cpu_ms: Record<string, number | null>;
  cpu_us_per_event: Record<string, number | null>;
  rss: ReturnType<ReturnType<typeof sampleRss>['stop']>;
}

export interface HistoryResult {
  config: (typeof SIZES)['history'];
  rounds: HistoryRound[];
  median: {
    none_facts_per_sec: number | null;
    kept_facts_per_sec: number | null;
    none_deliveries_per_sec: number | null;
    kept_deliveries_per_sec: number | null;
    /** median of the per-round ratios kept / none */
    ratio_facts_per_sec: number | null;
    ratio_deliveries_per_sec: number | null;
    ratio_sut_cpu_per_delivery: number | null;
  };
  /** events GET /v1/events lists on each side at the end (limit 1): 0 with retention 0, 1 with the default */
  events_listed: { none: number | null; kept: number | null };
  recovery: RecoveryResult | null;
  /** why the recovery part failed (the cost part is kept) */
  recovery_error: string | null;
  /** pino warnings of each svc serve; the recovery's include its 503s ("webhook delivery failed", rate-limited) */
  serve_warnings: { none: number; kept: number; recovery: number };
  recovery_warning_examples: string[];
}

/** A JSON request to svc's API as the org; throws unless the status is `want`. */
async function apiJson(
  svcUrl: string,
  org: OrgAuth,
  method: 'GET' | 'POST',
  p: string,
  body: unknown,
  want: number,
): Promise<Record<string, unknown>> {
  const res = await fetch(`${svcUrl}${p}`, {
    method,
    headers: { authorization: `Bearer ${org.api_token}`, 'x-svc-org-id': org.org_id, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status !== want) throw new Error(`${method} ${p}: HTTP ${res.status} ${text.slice(0, 300)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

const ratio3 = (a: number | null | undefined, b: number | null | undefined) =>
  a !== null && a !== undefined && b !== null && b !== undefined && Number.isFinite(a) && Number.isFinite(b) && b > 0
    ? Math.round((a / b) * 1000) / 1000
    : null;

const median3 = (v: Array<number | null | undefined>) => {
  const m = median(v.filter((x): x is number => x !== null && x !== undefined));
  return m === null ? null : Math.round(m * 1000) / 1000;
};

/** svc serve on a nats-server and SQLite file of its own, with its webhooks; runs until stop(). */
async function startHistorySide(
  env: ScenarioEnv,
  name: string,
  extra: string[],
  fanout: number,
): Promise<{ serve: Svc; nats: Nats; org: OrgAuth; stop(): Promise<void> }> {
  const nats = await startNats();
  const db = path.join(env.tmp, `${name}.db`);
  const org = createSvcOrg(db, `bench-${name}`);
  let serve: Svc;
  try {
    serve = await startSvcServe({ natsUrl: nats.url, db, logFile: path.join(env.tmp, `${name}-serve.log`), extra });
  } catch (err) {
    await nats.stop();
    throw err;
  }
  const stop = async () => {
    await stopChild(serve.child);
    await nats.stop();
  };
  try {
    await createWebhooks(
      serve.url,
      org,
      Array.from({ length: fanout }, (_, i) => `${env.receiver.url}/${name}/${i}`),
      4,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { serve, nats, org, stop };
}

/**
 * The cost of keeping history and attempts: two svc serve processes, each on its own nats-server
 * and SQLite file (`--event-retention 0`, and the default 7d), both running the whole time, the
 * same closed-loop workload against each in turn (the order alternates per round).
 */
export async function runHistoryScenario(env: ScenarioEnv): Promise<HistoryResult> {
  const S = SIZES.history;
  const none = await startHistorySide(env, 'history-none', ['--event-retention', '0'], S.fanout);
  let kept: Awaited<ReturnType<typeof startHistorySide>> | null = null;
  const rounds: HistoryRound[] = [];
  const events_listed: HistoryResult['events_listed'] = { none: null, kept: null };
  try {
    kept = await startHistorySide(env, 'history-kept', [], S.fanout);
    const sides = { none, kept };
    const window = Math.max(1, Math.floor(2000 / S.fanout));
    // the producer must reach each side's own nats-server
    const ncs = {
      none: await connect({ servers: none.nats.url, name: 'bench-history-none', noAsyncTraces: true }),
      kept: await connect({ servers: kept.nats.url, name: 'bench-history-kept', noAsyncTraces: true }),
    };
    try {
      const run = (side: 'none' | 'kept', name: string, facts: number) => {
        const s = sides[side];
        return runPhase(ncs[side], env.receiver, {
          name,
          orgId: s.org.org_id,
          fanout: S.fanout,
          events: facts,
          firstSeq: env.takeSeqs(facts),
          window,
          timeLimitMs: 60_000,
          drainMs: 10_000,
          cpuPids: { sut: s.serve.pid, nats: s.nats.pid },
        });
      };
      for (const side of ['none', 'kept'] as const) {
        const w = await run(side, `history ${side} warm-up`, S.warmup_facts);
        log(`history ${side} warm-up: ${w.deliveries}/${w.deliveries_expected} deliveries, ${w.deliveries_per_sec}/s`);
      }
      for (let r = 1; r <= S.rounds; r++) {
        const order: Array<'none' | 'kept'> = r % 2 ? ['none', 'kept'] : ['kept', 'none'];
        const got: Partial<Record<'none' | 'kept', PhaseResult>> = {};
        for (const side of order) {
          // the other side's last attempt-log flush (once a second) is over before this one starts
          await sleep(1200);
          got[side] = await run(side, `history ${side} ${r}`, S.facts);
        }
        const n = got.none!;
        const k = got.kept!;
        const round: HistoryRound = {
          order,
          none: n,
          kept: k,
          ratio: {
            facts_per_sec: ratio3(k.events_per_sec, n.events_per_sec),
            deliveries_per_sec: ratio3(k.deliveries_per_sec, n.deliveries_per_sec),
            steady_deliveries_per_sec: ratio3(k.steady_deliveries_per_sec, n.steady_deliveries_per_sec),
            sut_cpu_per_delivery: ratio3(k.cpu_us_per_delivery.sut, n.cpu_us_per_delivery.sut),
          },
        };
        rounds.push(round);
        log(
          `history round ${r}: retention 0 ${n.events_per_sec} facts/s ${n.deliveries_per_sec} del/s ` +
            `(${n.deliveries}/${n.deliveries_expected}), ` +
            `7d ${k.events_per_sec} facts/s ${k.deliveries_per_sec} del/s ` +
            `(${k.deliveries}/${k.deliveries_expected}): ${round.ratio.deliveries_per_sec}x`,
        );
      }
    } finally {
      await Promise.allSettled([closeProducersOf(ncs.none), closeProducersOf(ncs.kept)]);
      await Promise.allSettled([ncs.none.drain(), ncs.kept.drain()]);
    }
    for (const side of ['none', 'kept'] as const) {
      const page = await apiJson(sides[side].serve.url, sides[side].org, 'GET', '/v1/events?limit=1', undefined, 200);
      events_listed[side] = (page.data as unknown[]).length;
    }
  } finally {
    await none.stop();
    if (kept) await kept.stop();
  }
  let recovery: RecoveryResult | null = null;
  let recoveryError: string | null = null;
  let recoveryWarnings: string[] = [];
  try {
    const r = await runRecovery(env, S.recovery_events);
    recovery = r.result;
    recoveryWarnings = r.warnings;
  } catch (err) {
    recoveryError = String((err as Error).stack ?? err);
    log(`history recovery failed: ${String((err as Error).message ?? err)}`);
  }
  return {
    config: S,
    rounds,
    median: {
      none_facts_per_sec: median3(rounds.map((r) => r.none.events_per_sec)),
      kept_facts_per_sec: median3(rounds.map((r) => r.kept.events_per_sec)),
      none_deliveries_per_sec: median3(rounds.map((r) => r.none.deliveries_per_sec)),
      kept_deliveries_per_sec: median3(rounds.map((r) => r.kept.deliveries_per_sec)),
      ratio_facts_per_sec: median3(rounds.map((r) => r.ratio.facts_per_sec)),
      ratio_deliveries_per_sec: median3(rounds.map((r) => r.ratio.deliveries_per_sec)),
      ratio_sut_cpu_per_delivery: median3(rounds.map((r) => r.ratio.sut_cpu_per_delivery)),
    },
    events_listed,
    recovery,
    recovery_error: recoveryError,
    serve_warnings: {
      none: warnings(none.serve.lines).length,
      kept: kept ? warnings(kept.serve.lines).length : 0,
      recovery: recoveryWarnings.length,
    },
    recovery_warning_examples: recoveryWarnings.slice(0, 3).map((l) => l.slice(0, 300)),
  };
}

/** The recovery's receiver: answers `status` (503 while "down", 200 once back); counts the events firstSeq.. by seq. */
interface RecoveryReceiver {
  url: string;
  status: number;
  /** every request, the warm-up's included */
  requests: number;
  /** events of the range answered with a failure (their own attempts) */
  failed: number;
  lastFailedAt: number;
  /** distinct events of the range answered 2xx, and when the last of `expect` arrived */
  received: number;
  duplicates: number;
  expect: number;
  allAt: number | null;
  /** X-Svc-Recovery of the deliveries answered 2xx → how many */
  headers: Map<string, number>;
  close(): Promise<void>;
}

async function startRecoveryReceiver(firstSeq: number, n: number): Promise<RecoveryReceiver> {
  const got = new Uint8Array(n);
  const r: RecoveryReceiver = {
    url: '',
    status: 200,
    requests: 0,
    failed: 0,
    lastFailedAt: 0,
    received: 0,
    duplicates: 0,
    expect: n,
    allAt: null,
    headers: new Map(),
    close: async () => {},
  };
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      r.requests++;
      const status = r.status;
      const i = seqOf(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)) - firstSeq;
      if (i >= 0 && i < n) {
        if (status >= 300) {
          r.failed++;
          r.lastFailedAt = at;
        } else if (got[i]) {
          r.duplicates++;
        } else {
          got[i] = 1;
          r.received++;
          const h = String(req.headers['x-svc-recovery'] ?? '');
          r.headers.set(h, (r.headers.get(h) ?? 0) + 1);
          if (r.received === r.expect) r.allAt = at;
        }
      }
      res.writeHead(status).end();
    });
  });
  server.headersTimeout = 65_000;
  server.maxRequestsPerSocket = 0;
  Object.assign(r, await listenOnLoopback(server));
  return r;
}

/** Waits until `progress()` reaches `target`; throws when it has not moved for `stallMs`. */
async function awaitProgress(what: string, progress: () => number, target: number, stallMs: number): Promise<void> {
  let last = progress();
  let movedAt = Date.now();
  while (progress() < target) {
    await sleep(50);
    const now = progress();
    if (now !== last) {
      last = now;
      movedAt = Date.now();
    } else if (Date.now() - movedAt > stallMs) {
      throw new Error(`${what}: stuck at ${now} of ${target} for ${Math.round(stallMs / 1000)} s`);
    }
  }
}

/**
 * A recovery of `n` events to one fast webhook: svc serve (default retention) on its own
 * nats-server and SQLite file, one all-events webhook; `n` facts while its receiver answers 503
 * (each event's own attempt fails; with the breaker open, one at a time), then, with the receiver
 * answering 200, `POST …/recover {since: <before the first of them>}`, timed to the receiver having
 * every event and to the recovery's `state: "done"`.
 */
async function runRecovery(env: ScenarioEnv, n: number): Promise<{ result: RecoveryResult; warnings: string[] }> {
  const nats = await startNats();
  const db = path.join(env.tmp, 'recovery.db');
  const org = createSvcOrg(db, 'bench-recovery');
  const warmSeq = env.takeSeqs(3);
  const firstSeq = env.takeSeqs(n);
  const rx = await startRecoveryReceiver(firstSeq, n);
  let serve: Svc | null = null;
  let nc: NatsConnection | null = null;
  try {
    serve = await startSvcServe({ natsUrl: nats.url, db, logFile: path.join(env.tmp, 'recovery-serve.log') });
    const svc = serve;
    nc = await connect({ servers: nats.url, name: 'bench-recovery', noAsyncTraces: true });
    const producer = nc;
    const missed = SIZES.history.recovery_missed;
    let hooks = '';
    const hookUp = async () => {
      const hook = await apiJson(
        svc.url,
        org,
        'POST',
        '/v1/orgs/current/webhooks',
        { webhook_url: `${rx.url}/recovery`, secret: 'whsec_bench', interests: { all_events: true } },
        201,
      );
      hooks = `/v1/orgs/current/webhooks/${String(hook.webhook_id)}`;
      // warm-up: one event delivered (200), retried while the data plane's registry lacks the webhook
      rx.status = 200;
      for (let i = 0; i < 3 && rx.requests === 0; i++) {
        await runIngestPhase(producer, {
          name: 'recovery warm-up',
          orgId: org.org_id,
          facts: 1,
          firstSeq: warmSeq + i,
          window: 1,
          timeLimitMs: 10_000,
        });
        const until = Date.now() + 5000;
        while (rx.requests === 0 && Date.now() < until) await sleep(20);
      }
      if (rx.requests === 0) throw new Error('recovery: the warm-up event never reached the receiver');
    };
    if (missed === 'failing') await hookUp();
    await sleep(20);
    const since = new Date().toISOString();
    await sleep(20);

    // the receiver is down (or the webhook not there yet): no event gets through
    rx.status = 503;
    const before = await svcCounters(svc.url);
    const t0 = performance.now();
    const ingest = await runIngestPhase(nc, {
      name: 'recovery emit',
      orgId: org.org_id,
      facts: n,
      firstSeq,
      window: 1000,
      timeLimitMs: Math.max(120_000, n * 2),
    });
    if (ingest.facts_acked < n) throw new Error(`recovery: ${ingest.facts_acked} of ${n} facts acknowledged (${ingest.errors} errors)`);
    let emitMs = ingest.duration_ms;
    let svcFailures = 0;
    if (missed === 'failing') {
      log(`recovery: ${n} facts committed at ${ingest.facts_per_sec}/s; waiting for their attempts to fail`);
      await awaitProgress('recovery: the events’ own attempts', () => rx.failed, n, 30_000);
      emitMs = Math.round(rx.lastFailedAt - t0);
      const after = await awaitOutcomes(svc.url, before, n, 30_000);
      svcFailures = after.deliveries_failure - before.deliveries_failure;
      log(
        `recovery: ${rx.failed} attempts failed (503) in ${emitMs} ms (${Math.round((rx.failed / emitMs) * 1000)}/s); svc ` +
          `counted ${svcFailures} failures`,
      );
    } else {
      // every event through the data plane (to no webhook) before the webhook exists, so none reaches it
      const jsm = await jetstreamManager(nc);
      const until = Date.now() + 120_000;
      for (;;) {
        const info = await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER);
        if (info.num_pending + info.num_ack_pending === 0) break;
        if (Date.now() > until)
          throw new Error(`recovery: ${info.num_pending + info.num_ack_pending} events still queued 120 s after they were emitted`);
        await sleep(100);
      }
      log(`recovery: ${n} facts committed at ${ingest.facts_per_sec}/s, before the webhook existed`);
      await hookUp();
    }
    if (rx.received > 0) throw new Error(`recovery: ${rx.received} of the events reached the receiver before the recovery`);
    // every outcome written to the attempt log (once a second) before the recovery reads it
    await sleep(1500);

    // the receiver is back: recover since before the first event
    rx.status = 200;
    const pids = { sut: svc.pid, nats: nats.pid };
    const cpu0 = cpuSnapshot(pids);
    const rss = sampleRss(svc.pid, 100);
    const t1 = performance.now();
    const started = await apiJson(svc.url, org, 'POST', `${hooks}/recover`, { since }, 202);
    const t202 = performance.now();
    const id = String(started.recovery_id);
    const events = Number(started.events);
    rx.expect = events;
    if (rx.received >= events) rx.allAt = rx.allAt ?? performance.now();
    log(`recovery ${id}: ${events} events queued in ${Math.round(t202 - t1)} ms`);
    if (events === 0) throw new Error('recovery: the recovery found no event to attempt');
    let final: RecoveryResult['final'] = null;
    let doneAt: number | null = null;
    let movedAt = Date.now();
    let last = -1;
    while (doneAt === null || rx.allAt === null) {
      if (doneAt === null) {
        const st = await apiJson(svc.url, org, 'GET', `${hooks}/recoveries/${id}`, undefined, 200);
        final = {
          state: String(st.state),
          events: Number(st.events),
          attempted: Number(st.attempted),
          succeeded: Number(st.succeeded),
          failed: Number(st.failed),
        };
        if (final.state === 'done') doneAt = performance.now();
      }
      const progress = rx.received + (final?.attempted ?? 0);
      if (progress !== last) {
        last = progress;
        movedAt = Date.now();
      } else if (Date.now() - movedAt > 60_000) {
        throw new Error(`recovery ${id}: stuck at ${rx.received} received, ${final?.attempted} attempted of ${events} for 60 s`);
      }
      if (doneAt === null || rx.allAt === null) await sleep(200);
    }
    const cpu1 = cpuSnapshot(pids);
    const mem = rss.stop();
    const { cpu_ms, cpu_us_per_delivery } = cpuDelta(cpu0, cpu1, events);
    const receivedAt = rx.allAt as number;
    const rate = (ms: number) => (ms > 0 ? Math.round((events / ms) * 1000) : 0);
    const result: RecoveryResult = {
      missed,
      events: n,
      recovery_events: events,
      emit: {
        ingest,
        failed_attempts: rx.failed,
        duration_ms: emitMs,
        attempts_per_sec: emitMs > 0 ? Math.round((rx.failed / emitMs) * 1000) : 0,
        svc_failures: svcFailures,
      },
      request_ms: Math.round(t202 - t1),
      received_ms: Math.round(receivedAt - t1),
      received_ms_after_202: Math.round(receivedAt - t202),
      done_ms: Math.round(doneAt - t1),
      done_ms_after_202: Math.round(doneAt - t202),
      events_per_sec: rate(receivedAt - t1),
      events_per_sec_after_202: rate(receivedAt - t202),
      events_per_sec_done: rate(doneAt - t1),
      received: rx.received,
      duplicates: rx.duplicates,
      without_header: rx.received - (rx.headers.get(id) ?? 0),
      final,
      cpu_ms,
      cpu_us_per_event: cpu_us_per_delivery,
      rss: mem,
    };
    log(
      `recovery ${id}: ${rx.received}/${events} events at the receiver ${result.received_ms} ms after the request ` +
        `(${result.events_per_sec}/s; ` +
        `${result.received_ms_after_202} ms after the 202), done after ${result.done_ms} ms; ${rx.duplicates} ` +
        `duplicates, ${result.without_header} without the header`,
    );
    return { result, warnings: warnings(svc.lines) };
  } finally {
    if (nc) {
      await closeProducersOf(nc);
      await nc.drain().catch(() => {});
    }
    if (serve) await stopChild(serve.child);
    await rx.close();
    await nats.stop();
  }
}
