// The `ingest-stream` scenario (issue 51): what durable ingest costs. Ingest alone through the
// stream (an ingest gate stores each fact in SVC_FACTS and answers; the engine applies the stream:
// CONTRACT 9) against the direct path (the engine answers each fact after its own commit: svc serve
// before durable ingest, embedded mode now), in the same run, on one nats-server (replicas 1) and on
// a 3-server cluster on this machine (test/helpers/nats-cluster.ts) with SVC_FACTS on 3 servers.
// Each side is bench/ingest-path-child.ts: the same engine on a fresh SQLite file, only the path
// differs; the sides alternate (direct, stream, then stream, direct, …). The rate is of facts
// applied: the producer keeps `window` requests outstanding until `facts` are answered, and the
// phase ends when the engine has applied them all (for the direct path that is the last answer;
// the gate answers once a fact is stored, and the engine may still be applying).
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { startNatsCluster } from '../test/helpers/nats-cluster.ts';
import { childPids, cpuSnapshot, runIngestPhase, type CpuPids, type IngestResult, type Percentiles } from './harness.ts';
import { log, sleep, spawnChild, startNats, stopChild, SVC_NODE_ARGS } from './procs.ts';
import type { ScenarioEnv } from './scenarios.ts';

const num = (name: string, dflt: number, min = 1): number => {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v >= min ? v : dflt;
};

export const INGEST_STREAM_SIZES = {
  facts: Math.round(num('BENCH_STREAM_FACTS', 20_000)),
  window: Math.round(num('BENCH_STREAM_WINDOW', 1000)),
  rounds: Math.round(num('BENCH_STREAM_ROUNDS', 2)),
  warmup_facts: 2000,
  replicas: (process.env.BENCH_STREAM_REPLICAS ?? '1,3').split(',').map(Number),
};

type PathName = 'direct' | 'stream';

export interface IngestPathPhase {
  path: PathName;
  round: number;
  /** facts applied per second: first send → the last fact applied */
  facts_per_sec: number;
  /** facts answered per second: first send → the last answer (the gate answers once a fact is stored) */
  acked_facts_per_sec: number;
  /** the last answer → the last fact applied, ms */
  apply_tail_ms: number;
  facts_acked: number;
  errors: number;
  ack_ms: Percentiles;
  /** CPU of the side's process and of nats-server(s), first send → the last fact applied, µs per fact */
  cpu_us_per_fact: Record<string, number | null>;
}

export interface IngestStreamReplicas {
  replicas: number;
  phases: IngestPathPhase[];
  /** stream / direct, facts applied per second, per round */
  ratio_per_round: Array<number | null>;
  ratio_median: number | null;
  direct_facts_per_sec_median: number | null;
  stream_facts_per_sec_median: number | null;
}

export interface IngestStreamResult {
  config: typeof INGEST_STREAM_SIZES;
  by_replicas: IngestStreamReplicas[];
}

const median = (xs: number[]): number | null => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return null;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const r3 = (x: number) => Math.round(x * 1000) / 1000;

async function appliedCount(nc: NatsConnection): Promise<number> {
  return Number((await nc.request('bench.applied', '', { timeout: 10_000 })).string());
}

/** One phase against a side: the producer's closed loop, then until the engine has applied every fact answered. */
async function phase(
  env: ScenarioEnv,
  nc: NatsConnection,
  side: { orgId: string; pids: CpuPids },
  name: string,
  facts: number,
  window: number,
): Promise<{ ack: IngestResult; appliedMs: number; tailMs: number; cpu: Record<string, number | null> }> {
  const before = await appliedCount(nc);
  const cpu0 = cpuSnapshot(side.pids);
  const ack = await runIngestPhase(nc, { name, orgId: side.orgId, facts, firstSeq: env.takeSeqs(facts), window, timeLimitMs: 120_000 });
  const answeredAt = performance.now();
  const end = answeredAt + 120_000;
  while ((await appliedCount(nc)) < before + ack.facts_acked) {
    if (performance.now() > end) throw new Error(`${name}: ${ack.facts_acked} facts answered, not all applied within 120 s`);
    await sleep(5);
  }
  const tailMs = performance.now() - answeredAt;
  const cpu1 = cpuSnapshot(side.pids);
  const cpu: Record<string, number | null> = {};
  for (const k of Object.keys(cpu1)) {
    const a = cpu0[k];
    const b = cpu1[k];
    cpu[k] = a !== null && b !== null && ack.facts_acked ? Math.round(((b - a) * 1000) / ack.facts_acked) : null;
  }
  return { ack, appliedMs: ack.duration_ms + tailMs, tailMs, cpu };
}

async function runOn(env: ScenarioEnv, replicas: number): Promise<IngestStreamReplicas> {
  const S = INGEST_STREAM_SIZES;
  const before = new Set(childPids('nats-server'));
  const single = replicas === 1 ? await startNats() : null;
  const cluster = single ? null : await startNatsCluster();
  const url = single ? single.url : cluster!.urls;
  const natsPids = childPids('nats-server').filter((p) => !before.has(p));
  const nc = await connect({ servers: url.split(','), name: 'bench-ingest-stream', noAsyncTraces: true });
  const phases: IngestPathPhase[] = [];
  try {
    for (let round = 1; round <= S.rounds; round++) {
      for (const which of (round % 2 ? ['direct', 'stream'] : ['stream', 'direct']) as PathName[]) {
        const tag = `ingest-${which}-r${replicas}-${round}`;
        const child = await spawnChild(
          tag,
          [...SVC_NODE_ARGS, '--import', 'tsx', 'bench/ingest-path-child.ts'],
          { BENCH_NATS_URL: url, BENCH_PATH: which, BENCH_REPLICAS: String(replicas), BENCH_DB: path.join(env.tmp, `${tag}.db`) },
          (l) => l.startsWith('ready '),
          path.join(env.tmp, `${tag}.log`),
        );
        try {
          const side = { orgId: child.line.trim().slice('ready '.length), pids: { sut: child.pid, nats: natsPids } };
          await phase(env, nc, side, `${which} warm-up`, S.warmup_facts, S.window);
          await sleep(300);
          const p = await phase(env, nc, side, `${which} replicas ${replicas} round ${round}`, S.facts, S.window);
          const facts_per_sec = Math.round((p.ack.facts_acked / p.appliedMs) * 1000);
          phases.push({
            path: which,
            round,
            facts_per_sec,
            acked_facts_per_sec: p.ack.facts_per_sec,
            apply_tail_ms: Math.round(p.tailMs),
            facts_acked: p.ack.facts_acked,
            errors: p.ack.errors,
            ack_ms: p.ack.ack_ms,
            cpu_us_per_fact: p.cpu,
          });
          log(
            `ingest-stream replicas ${replicas} round ${round} ${which}: ${facts_per_sec} facts/s applied ` +
              `(${p.ack.facts_per_sec}/s answered, the last applied ${Math.round(p.tailMs)} ms after the last answer; ` +
              `ack p50 ${p.ack.ack_ms.p50} p99 ${p.ack.ack_ms.p99} ms; ${p.ack.errors} errors; ` +
              `CPU µs/fact ${JSON.stringify(p.cpu)})`,
          );
        } finally {
          await stopChild(child.child);
        }
      }
    }
  } finally {
    await nc.drain().catch(() => {});
    await single?.stop();
    await cluster?.stop();
  }
  const of = (which: PathName, round: number) => phases.find((p) => p.path === which && p.round === round)?.facts_per_sec ?? NaN;
  const ratio_per_round = Array.from({ length: S.rounds }, (_, i) => {
    const d = of('direct', i + 1);
    const s = of('stream', i + 1);
    return d > 0 && Number.isFinite(s) ? r3(s / d) : null;
  });
  return {
    replicas,
    phases,
    ratio_per_round,
    ratio_median: median(ratio_per_round.filter((x): x is number => x !== null)),
    direct_facts_per_sec_median: median(phases.filter((p) => p.path === 'direct').map((p) => p.facts_per_sec)),
    stream_facts_per_sec_median: median(phases.filter((p) => p.path === 'stream').map((p) => p.facts_per_sec)),
  };
}

export async function runIngestStreamScenario(env: ScenarioEnv): Promise<IngestStreamResult> {
  const by_replicas: IngestStreamReplicas[] = [];
  for (const replicas of INGEST_STREAM_SIZES.replicas) by_replicas.push(await runOn(env, replicas));
  return { config: INGEST_STREAM_SIZES, by_replicas };
}

/** The scenario's table for the report. */
export function ingestStreamTable(r: IngestStreamResult): string {
  const lines = [
    `ingest-stream: ${r.config.facts} facts per phase, ${r.config.window} outstanding, facts applied per second ` +
      '(first send → last fact applied); stream = gate → SVC_FACTS → applier, direct = the engine answers after its commit',
  ];
  for (const x of r.by_replicas) {
    for (const p of x.phases) {
      lines.push(
        `  replicas ${x.replicas} round ${p.round} ${p.path.padEnd(6)} ${String(p.facts_per_sec).padStart(6)} facts/s applied, ` +
          `${String(p.acked_facts_per_sec).padStart(6)}/s answered, tail ${p.apply_tail_ms} ms, ack p99 ${p.ack_ms.p99} ms`,
      );
    }
    lines.push(
      `  replicas ${x.replicas}: stream/direct ${x.ratio_median ?? '-'} (rounds ${x.ratio_per_round.join(', ')}); medians ` +
        `direct ${x.direct_facts_per_sec_median} facts/s, stream ${x.stream_facts_per_sec_median} facts/s`,
    );
  }
  return lines.join('\n');
}
