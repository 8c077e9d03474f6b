// The `replicas` scenario (issue 34): what replicated streams cost. svc on a 3-server NATS cluster
// (test/helpers/nats-cluster.ts: three nats-servers on this machine, routed to each other), once
// with `--nats-replicas 1` and once with `--nats-replicas 3`, in alternating rounds (1, 3, then 3,
// 1, …), each side a fresh svc serve and database on streams and buckets it created itself (the
// previous side's are deleted first). Each side: fan-out 10, a warm-up, then a saturated closed-loop
// phase (throughput) and a paced one (latency when not overloaded). The figure an operator chooses
// by is replicas 3 / replicas 1 of the same round (median over rounds).
import path from 'node:path';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { EVENTS_STREAM, LAYOUT_STREAMS } from '../src/bus/nats/jetstream.ts';
import { startNatsCluster } from '../test/helpers/nats-cluster.ts';
import { childPids, closeProducersOf, runPhase, type PhaseResult } from './harness.ts';
import { createSvcOrg, createWebhooks, log, sleep, startSvcServe, stopChild, warnings } from './procs.ts';
import type { ScenarioEnv } from './scenarios.ts';

const num = (name: string, dflt: number, min = 1): number => {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v >= min ? v : dflt;
};

export const REPLICAS_SIZES = {
  rounds: Math.round(num('BENCH_REPLICAS_ROUNDS', 3)),
  fanout: Math.round(num('BENCH_REPLICAS_FANOUT', 10)),
  /** facts of the saturated phase (× fan-out deliveries) */
  facts: Math.round(num('BENCH_REPLICAS_FACTS', 2000)),
  /** facts/s of the paced phase */
  paced_rate: num('BENCH_REPLICAS_PACED_RATE', 100),
  paced_seconds: num('BENCH_REPLICAS_PACED_SECONDS', 5),
};

export interface ReplicasSide {
  replicas: number;
  round: number;
  saturated: Pick<
    PhaseResult,
    | 'deliveries'
    | 'deliveries_expected'
    | 'deliveries_per_sec'
    | 'duration_ms'
    | 'latency_ms'
    | 'cpu_us_per_delivery'
    | 'missing'
    | 'ingest_errors'
  >;
  paced: Pick<PhaseResult, 'deliveries' | 'deliveries_expected' | 'latency_ms' | 'kept_up' | 'missing' | 'ingest_errors'>;
  serve_warnings: number;
}

export interface ReplicasResult {
  config: typeof REPLICAS_SIZES;
  sides: ReplicasSide[];
  /** per round: replicas 3 / replicas 1 saturated deliveries/s */
  throughput_ratio_per_round: number[];
  throughput_ratio_median: number | null;
  /** per round: replicas 3 / replicas 1 of nats-server CPU (all three) per delivery */
  nats_cpu_ratio_per_round: number[];
  paced_p99_ms: { replicas1: number[]; replicas3: number[] };
}

const median = (xs: number[]): number | null => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const r3 = (x: number) => Math.round(x * 1000) / 1000;

async function deleteLayout(jsm: JetStreamManager): Promise<void> {
  for (const s of LAYOUT_STREAMS) await jsm.streams.delete(s).catch(() => false);
}

export async function runReplicasScenario(env: ScenarioEnv): Promise<ReplicasResult> {
  const S = REPLICAS_SIZES;
  const before = new Set(childPids('nats-server'));
  const cluster = await startNatsCluster();
  const natsPids = childPids('nats-server').filter((p) => !before.has(p));
  const nc = await connect({ servers: cluster.urls.split(','), name: 'bench-replicas', noAsyncTraces: true });
  const jsm = await jetstreamManager(nc);
  const sides: ReplicasSide[] = [];
  try {
    for (let round = 1; round <= S.rounds; round++) {
      for (const replicas of round % 2 ? [1, 3] : [3, 1]) {
        await deleteLayout(jsm);
        const db = path.join(env.tmp, `replicas-${round}-${replicas}.db`);
        const org = createSvcOrg(db, `bench-replicas-${replicas}`);
        const serve = await startSvcServe({
          natsUrl: cluster.urls,
          db,
          logFile: path.join(env.tmp, `replicas-${round}-${replicas}.log`),
          extra: ['--nats-replicas', String(replicas)],
        });
        try {
          const got = (await jsm.streams.info(EVENTS_STREAM)).config.num_replicas;
          if (got !== replicas) throw new Error(`replicas: ${EVENTS_STREAM} has ${got} replicas, asked for ${replicas}`);
          await createWebhooks(
            serve.url,
            org,
            Array.from({ length: S.fanout }, (_, i) => `${env.receiver.url}/r/${i}`),
          );
          const common = {
            orgId: org.org_id,
            fanout: S.fanout,
            timeLimitMs: 25_000,
            drainMs: 10_000,
            cpuPids: { sut: serve.pid, nats: natsPids },
          };
          const window = Math.max(1, Math.floor(2000 / S.fanout));
          const warmEvents = Math.ceil(3000 / S.fanout);
          await runPhase(nc, env.receiver, {
            ...common,
            name: `replicas ${replicas} warm-up`,
            events: warmEvents,
            firstSeq: env.takeSeqs(warmEvents),
            window,
          });
          await sleep(300);
          const sat = await runPhase(nc, env.receiver, {
            ...common,
            name: `replicas ${replicas} saturated`,
            events: S.facts,
            firstSeq: env.takeSeqs(S.facts),
            window,
          });
          await sleep(300);
          const pacedEvents = Math.max(10, Math.round(S.paced_rate * S.paced_seconds));
          const paced = await runPhase(nc, env.receiver, {
            ...common,
            name: `replicas ${replicas} paced`,
            events: pacedEvents,
            firstSeq: env.takeSeqs(pacedEvents),
            ratePerSec: S.paced_rate,
          });
          log(
            `replicas ${replicas} (round ${round}): saturated ${sat.deliveries}/${sat.deliveries_expected} ` +
              `= ${sat.deliveries_per_sec}/s, p99 ${sat.latency_ms.p99} ms, ` +
              `nats ${sat.cpu_us_per_delivery.nats ?? '?'} µs/del; paced ${S.paced_rate}/s × ${S.fanout}: ` +
              `p50 ${paced.latency_ms.p50} p99 ${paced.latency_ms.p99} ms`,
          );
          sides.push({
            replicas,
            round,
            saturated: {
              deliveries: sat.deliveries,
              deliveries_expected: sat.deliveries_expected,
              deliveries_per_sec: sat.deliveries_per_sec,
              duration_ms: sat.duration_ms,
              latency_ms: sat.latency_ms,
              cpu_us_per_delivery: sat.cpu_us_per_delivery,
              missing: sat.missing,
              ingest_errors: sat.ingest_errors,
            },
            paced: {
              deliveries: paced.deliveries,
              deliveries_expected: paced.deliveries_expected,
              latency_ms: paced.latency_ms,
              kept_up: paced.kept_up,
              missing: paced.missing,
              ingest_errors: paced.ingest_errors,
            },
            serve_warnings: 0,
          });
          sides[sides.length - 1].serve_warnings = warnings(serve.lines).length;
        } finally {
          await closeProducersOf(nc);
          await stopChild(serve.child);
        }
      }
    }
  } finally {
    await nc.close().catch(() => {});
    await cluster.stop();
  }
  const ratios: number[] = [];
  const natsRatios: number[] = [];
  for (let round = 1; round <= S.rounds; round++) {
    const one = sides.find((s) => s.round === round && s.replicas === 1);
    const three = sides.find((s) => s.round === round && s.replicas === 3);
    if (!one || !three || !one.saturated.deliveries_per_sec) continue;
    ratios.push(r3(three.saturated.deliveries_per_sec / one.saturated.deliveries_per_sec));
    const n1 = one.saturated.cpu_us_per_delivery.nats;
    const n3 = three.saturated.cpu_us_per_delivery.nats;
    if (n1 && n3) natsRatios.push(r3(n3 / n1));
  }
  return {
    config: S,
    sides,
    throughput_ratio_per_round: ratios,
    throughput_ratio_median: median(ratios),
    nats_cpu_ratio_per_round: natsRatios,
    paced_p99_ms: {
      replicas1: sides.filter((s) => s.replicas === 1).map((s) => s.paced.latency_ms.p99),
      replicas3: sides.filter((s) => s.replicas === 3).map((s) => s.paced.latency_ms.p99),
    },
  };
}
