// `npm run bench`: svc against a bare NATS → undici baseline, webhook fan-out to 10 and 100 hooks.
//
//   private nats-server (JetStream, temp dir, free port)
//   producer (this process) ── NATS requests svc.ingest.<org>.workflows.bwf_<seq> ──▶ system under test
//   system under test (a child process) ── HTTP POST × fan-out ──▶ receiver (this process, 204 at once)
//
// The system under test is the baseline (bench/baseline.ts) or svc (`bin/svc.mjs serve --nats …`),
// each alone and in its own process, so that neither shares an event loop with the producer and
// the receiver. They alternate over several rounds (baseline, svc, baseline, svc, …): each svc
// figure is compared with the baseline of its own round and the report gives the median over
// rounds, so that other load on the machine does not skew one side only. For each fan-out: a
// warm-up, a saturated closed-loop phase (throughput; latency under load, mostly queueing) and a
// paced open-loop phase at a fixed offered load that both sustain (latency when not overloaded).
// Results: a table on stdout, JSON in bench/results/latest.json.
//
// Environment knobs: BENCH_ROUNDS (default 4), BENCH_FANOUTS (default 10,100), BENCH_SCALE
// (default 1: multiplies event counts), BENCH_PACED_RATE (deliveries/s offered in the paced phase,
// default 2000), BENCH_SVC_NODE_ARGS (extra node flags for the svc child, e.g.
// "--cpu-prof --cpu-prof-dir=/tmp/prof"), BENCH_ONLY=svc|baseline.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { findNatsServer, startNatsServer } from '../test/helpers/nats-server.ts';
import { openDb } from '../store/db.ts';
import { createOrg } from '../store/orgs.ts';
import { childPid, runPhase, startBenchReceiver, type BenchReceiver, type CpuPids, type PhaseResult } from './harness.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const RESULTS = path.join(ROOT, 'bench', 'results');
const SCALE = Number(process.env.BENCH_SCALE ?? '1') || 1;
const ONLY = process.env.BENCH_ONLY ?? '';
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? '4') || 4);

/** Deliveries in flight at most per closed-loop phase: enough to keep every hook's 8 slots busy. */
const WINDOW_DELIVERIES = 2000;
/** The paced phase offers this many deliveries per second (facts/s × fan-out), the same for both systems. */
const PACED_DELIVERIES_PER_SEC = Math.max(1, Number(process.env.BENCH_PACED_RATE ?? '2000') || 2000);

interface CaseSpec {
  fanout: number;
  warmupEvents: number;
  events: number;
  pacedSeconds: number;
}

/** Each case: 25 000 deliveries measured (3 000 in the warm-up), e.g. 2 500 facts × 10 hooks. */
const CASES: CaseSpec[] = (process.env.BENCH_FANOUTS ?? '10,100')
  .split(',')
  .map((x) => Number(x))
  .filter((f) => Number.isInteger(f) && f > 0)
  .map((fanout) => ({
    fanout,
    warmupEvents: Math.ceil(3000 / fanout),
    events: Math.max(1, Math.round((Math.min(5000 * fanout, 25_000) / fanout) * SCALE)),
    pacedSeconds: 2,
  }));
const PHASE_LIMIT_MS = 25_000;
const DRAIN_MS = 10_000;

type System = 'baseline' | 'svc';

interface CaseResult {
  fanout: number;
  saturated: PhaseResult;
  paced: PhaseResult;
}

interface SystemRun {
  cases: CaseResult[];
  notes: Record<string, unknown>;
}

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

function log(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}

/** Spawn a node child; resolves once a stdout line satisfies `ready` (returns that line). */
async function spawnChild(
  name: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: (line: string) => boolean,
  logFile: string,
): Promise<{ child: ChildProcess; line: string; lines: string[] }> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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
  });
  return { child, line, lines };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(t);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let nextSeq = 1;
function takeSeqs(n: number): number {
  const first = nextSeq;
  nextSeq += n;
  return first;
}

/** Warm-up, saturated and paced phases of every case against whatever answers the ingest subjects now. */
async function runCases(
  system: System,
  nc: NatsConnection,
  receiver: BenchReceiver,
  orgOf: (fanout: number) => string,
  cpuPids: CpuPids,
): Promise<CaseResult[]> {
  const out: CaseResult[] = [];
  for (const c of CASES) {
    const orgId = orgOf(c.fanout);
    const window = Math.max(1, Math.floor(WINDOW_DELIVERIES / c.fanout));
    const common = { orgId, fanout: c.fanout, timeLimitMs: PHASE_LIMIT_MS, drainMs: DRAIN_MS, cpuPids };
    const warm = await runPhase(nc, receiver, { ...common, name: `${system} warm-up x${c.fanout}`, events: c.warmupEvents, firstSeq: takeSeqs(c.warmupEvents), window });
    log(`${system} x${c.fanout} warm-up: ${warm.deliveries}/${warm.deliveries_expected} deliveries, ${warm.deliveries_per_sec}/s`);
    await sleep(300);
    const saturated = await runPhase(nc, receiver, { ...common, name: `${system} saturated x${c.fanout}`, events: c.events, firstSeq: takeSeqs(c.events), window });
    log(
      `${system} x${c.fanout} saturated: ${saturated.deliveries}/${saturated.deliveries_expected} deliveries in ${saturated.duration_ms} ms = ` +
        `${saturated.deliveries_per_sec}/s; latency p50 ${saturated.latency_ms.p50} p99 ${saturated.latency_ms.p99} ms`,
    );
    await sleep(300);
    const rate = PACED_DELIVERIES_PER_SEC / c.fanout;
    const pacedEvents = Math.max(10, Math.round(rate * c.pacedSeconds));
    const paced = await runPhase(nc, receiver, {
      ...common,
      name: `${system} paced x${c.fanout}`,
      events: pacedEvents,
      firstSeq: takeSeqs(pacedEvents),
      ratePerSec: rate,
    });
    log(
      `${system} x${c.fanout} paced at ${Math.round(rate)} facts/s: ${paced.deliveries}/${paced.deliveries_expected} deliveries; ` +
        `latency p50 ${paced.latency_ms.p50} p99 ${paced.latency_ms.p99} ms`,
    );
    await sleep(300);
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

async function runSvc(env: Env, round: number): Promise<SystemRun> {
  const nodeArgs = (process.env.BENCH_SVC_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
  const logFile = path.join(env.tmp, `svc-${round}.log`);
  const { child, line, lines } = await spawnChild(
    'svc',
    [...nodeArgs, 'bin/svc.mjs', 'serve', '--nats', env.natsUrl, '--db', env.db, '--port', '0', '--no-local-runner', '--allow-private-targets', '--drift-interval', 'off'],
    {},
    (l) => l.includes('listening on'),
    logFile,
  );
  const url = /listening on (http:\/\/[^\s"]+)/.exec(line)![1];
  try {
    if (round === 1) {
      // webhooks over the HTTP API: all_events, signed (a secret), one URL each on the one receiver;
      // they stay in svc's database for the later rounds
      for (const [fanout, org] of env.orgs) {
        const headers = { authorization: `Bearer ${org.api_token}`, 'x-svc-org-id': org.org_id, 'content-type': 'application/json' };
        for (const u of hookUrls(env.receiver, fanout)) {
          const res = await fetch(`${url}/v1/orgs/current/webhooks`, {
            method: 'POST',
            headers,
            body: JSON.stringify({ webhook_url: u, secret: 'whsec_bench', interests: { all_events: true } }),
          });
          if (res.status !== 201 && res.status !== 200) throw new Error(`creating a webhook: HTTP ${res.status} ${await res.text()}`);
          await res.arrayBuffer();
        }
      }
    }
    const loadavg = os.loadavg()[0];
    const cpuPids = { sut: child.pid ?? null, nats: env.natsPid };
    const cases = await runCases('svc', env.nc, env.receiver, (f) => env.orgs.get(f)!.org_id, cpuPids);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    const pick = (re: RegExp) => Number(re.exec(metrics)?.[1] ?? 0);
    const notes = {
      loadavg_1m_at_start: Math.round(loadavg * 100) / 100,
      deliveries_success: pick(/^svc_deliveries_total\{outcome="success"\} (\d+)/m),
      deliveries_failure: pick(/^svc_deliveries_total\{outcome="failure"\} (\d+)/m),
      ingest_accepted: pick(/^svc_ingest_messages_total\{result="accepted"\} (\d+)/m),
      log_warnings: lines.filter((l) => /"level":(40|50|60)/.test(l)).length,
    };
    return { cases, notes };
  } finally {
    await stopChild(child);
    const warnings = lines.filter((l) => /"level":(40|50|60)/.test(l));
    if (warnings.length) log(`svc logged ${warnings.length} warnings/errors, e.g. ${warnings[0].slice(0, 300)}`);
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

const ratio = (a: number, b: number) => (b > 0 && Number.isFinite(a) ? Math.round((a / b) * 1000) / 1000 : null);

function median(values: Array<number | null>): number | null {
  const v = values.filter((x): x is number => x !== null && Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return null;
  const m = v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
  return Math.round(m * 1000) / 1000;
}

type Ratios = ReturnType<typeof ratiosOf>;

function ratiosOf(svc: CaseResult, base: CaseResult) {
  return {
    fanout: svc.fanout,
    throughput: ratio(svc.saturated.deliveries_per_sec, base.saturated.deliveries_per_sec),
    steady_throughput: ratio(svc.saturated.steady_deliveries_per_sec, base.saturated.steady_deliveries_per_sec),
    saturated_latency_p50: ratio(svc.saturated.latency_ms.p50, base.saturated.latency_ms.p50),
    saturated_latency_p99: ratio(svc.saturated.latency_ms.p99, base.saturated.latency_ms.p99),
    paced_latency_p50: svc.paced && base.paced ? ratio(svc.paced.latency_ms.p50, base.paced.latency_ms.p50) : null,
    paced_latency_p99: svc.paced && base.paced ? ratio(svc.paced.latency_ms.p99, base.paced.latency_ms.p99) : null,
    sut_cpu_per_delivery: ratio(svc.saturated.cpu_us_per_delivery.sut ?? NaN, base.saturated.cpu_us_per_delivery.sut ?? NaN),
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
        deliveries_per_sec: median(rs.map((r) => r.saturated.deliveries_per_sec)),
        steady_deliveries_per_sec: median(rs.map((r) => r.saturated.steady_deliveries_per_sec)),
        saturated_p50_ms: median(rs.map((r) => r.saturated.latency_ms.p50)),
        saturated_p99_ms: median(rs.map((r) => r.saturated.latency_ms.p99)),
        paced_facts_per_sec: median(rs.map((r) => r.paced?.rate_events_per_sec ?? null)),
        paced_p50_ms: median(rs.map((r) => r.paced?.latency_ms.p50 ?? null)),
        paced_p99_ms: median(rs.map((r) => r.paced?.latency_ms.p99 ?? null)),
        sut_cpu_us_per_delivery: median(rs.map((r) => r.saturated.cpu_us_per_delivery.sut ?? null)),
        nats_cpu_us_per_delivery: median(rs.map((r) => r.saturated.cpu_us_per_delivery.nats ?? null)),
        bench_cpu_us_per_delivery: median(rs.map((r) => r.saturated.cpu_us_per_delivery.bench ?? null)),
        missing: rs.reduce((n, r) => n + r.saturated.missing + (r.paced?.missing ?? 0), 0),
        duplicates: rs.reduce((n, r) => n + r.saturated.duplicates + (r.paced?.duplicates ?? 0), 0),
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

function table(summary: ReturnType<typeof summarise>, ratios: Ratios[]): string {
  const rows: string[][] = [
    ['fan-out', 'system', 'del/s', 'steady del/s', 'sat p50 ms', 'sat p99 ms', 'paced facts/s', 'paced p50 ms', 'paced p99 ms', 'cpu µs/del', 'nats µs/del', 'missing'],
  ];
  const f = (v: number | null | undefined) => (v === null || v === undefined ? '-' : String(Math.round(v * 100) / 100));
  for (const c of CASES) {
    const per = summary[`x${c.fanout}`] ?? {};
    for (const sys of ['baseline', 'svc'] as System[]) {
      const s = per[sys];
      if (!s) continue;
      rows.push([
        String(c.fanout),
        sys,
        f(s.deliveries_per_sec),
        f(s.steady_deliveries_per_sec),
        f(s.saturated_p50_ms),
        f(s.saturated_p99_ms),
        f(s.paced_facts_per_sec === null ? null : Math.round(s.paced_facts_per_sec)),
        f(s.paced_p50_ms),
        f(s.paced_p99_ms),
        f(s.sut_cpu_us_per_delivery),
        f(s.nats_cpu_us_per_delivery),
        String(s.missing),
      ]);
    }
    const r = ratios.find((x) => x.fanout === c.fanout);
    if (r) {
      const x = (v: number | null) => (v === null ? '-' : `${Math.round(v * 100) / 100}x`);
      rows.push([String(c.fanout), 'svc/baseline', x(r.throughput), x(r.steady_throughput), x(r.saturated_latency_p50), x(r.saturated_latency_p99), '', x(r.paced_latency_p50), x(r.paced_latency_p99), x(r.sut_cpu_per_delivery), '', '']);
    }
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  ')).join('\n');
}

async function main(): Promise<void> {
  const started = Date.now();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
  const nats = await startNatsServer();
  const receiver = await startBenchReceiver();
  const nc = await connect({ servers: nats.url, name: 'bench-producer' });
  log(`nats ${nats.url}, receiver ${receiver.url}, work dir ${tmp}, ${ROUNDS} rounds`);

  // the orgs (one per fan-out) exist in svc's database before it starts; the baseline uses the same ids
  const db = path.join(tmp, 'svc.db');
  const orgs = new Map<number, { org_id: string; api_token: string }>();
  const handle = openDb(db);
  for (const c of CASES) {
    const { org, api_token } = createOrg(handle, `bench-x${c.fanout}`);
    orgs.set(c.fanout, { org_id: org.org_id, api_token });
  }
  handle.close();
  const env: Env = { natsUrl: nats.url, nc, receiver, orgs, db, tmp, natsPid: childPid('nats-server') };

  const rounds: Array<Partial<Record<System, SystemRun>>> = [];
  let failed: unknown = null;
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      const r: Partial<Record<System, SystemRun>> = {};
      rounds.push(r);
      if (ONLY !== 'svc') r.baseline = await runBaseline(env, round);
      if (ONLY !== 'baseline') r.svc = await runSvc(env, round);
    }
  } catch (err) {
    failed = err;
  } finally {
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
    machine: machine(),
    config: {
      rounds: ROUNDS,
      cases: CASES,
      window_deliveries: WINDOW_DELIVERIES,
      paced_deliveries_per_sec: PACED_DELIVERIES_PER_SEC,
      phase_time_limit_ms: PHASE_LIMIT_MS,
      max_in_flight_per_webhook: 8,
      connections_per_origin: 64,
      scale: SCALE,
    },
    ratios_median: perRound.length ? ratios : [],
    ratios_range: perRound.length ? ratioRanges(perRound) : [],
    ratios_per_round: perRound,
    summary_median: summary,
    rounds,
    error: failed ? String((failed as Error).stack ?? failed) : null,
  };
  fs.mkdirSync(RESULTS, { recursive: true });
  const file = path.join(RESULTS, 'latest.json');
  fs.writeFileSync(`${file}.tmp`, `${JSON.stringify(result, null, 2)}\n`);
  fs.renameSync(`${file}.tmp`, file);

  process.stdout.write(`\nmedians over ${rounds.length} round(s); ratios are svc / baseline of the same round\n${table(summary, perRound.length ? ratios : [])}\n\n`);
  const ranges = perRound.length ? ratioRanges(perRound) : [];
  for (const r of perRound.length ? ratios : []) {
    const pct = (v: number | null) => (v === null ? '-' : `${Math.round(v * 100)} %`);
    const range = ranges.find((x) => x.fanout === r.fanout)?.throughput as [number, number] | null | undefined;
    process.stdout.write(
      `x${r.fanout}: svc throughput ${pct(r.throughput)} of the baseline` +
        `${range ? ` (rounds ${pct(range[0])}–${pct(range[1])})` : ''}, steady state ${pct(r.steady_throughput)}; ` +
        `latency p50/p99 ${r.saturated_latency_p50}x/${r.saturated_latency_p99}x saturated, ${r.paced_latency_p50}x/${r.paced_latency_p99}x paced; ` +
        `svc CPU per delivery ${r.sut_cpu_per_delivery}x\n`,
    );
  }
  process.stdout.write(`results: ${path.relative(ROOT, file)} (${result.wall_seconds} s)\n`);
  if (failed) {
    log(`failed: ${String((failed as Error).stack ?? failed)}; logs in ${tmp}`);
    process.exitCode = 1;
  } else {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
