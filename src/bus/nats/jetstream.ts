// The JetStream layout shared by the control plane and the data plane (NATS mode):
//
//   SVC_EVENTS    stream, work queue, subjects svc.hop.>  — the durable delivery queue. The relay
//                 publishes batches of outbox rows here (src/bus/hop.ts: msg id = the batch id,
//                 seal in a header); the shared durable pull consumer `svc-dispatch` hands each
//                 batch to one data plane, which acks it only once every attempt each of its events
//                 needs has an outcome. Observers get one plain message per event on svc.events.…
//                 (CONTRACT 5.2), which no stream captures: they cost nothing durable.
//   SVC_OUTCOMES  stream, work queue, subjects svc.outcomes.> — outcome batches from svc worker
//                 data planes to the engine (durable consumer `svc-engine`); svc serve's own
//                 delivery threads hand theirs over in process.
//   SVC_FACTS     stream, limits (kept 7 days; no delete, no purge), subjects svc.facts.> — producers'
//                 facts (CONTRACT 9 "Durable ingest"): every svc process's ingest gate stores each fact
//                 here (msg id: one per request received, so a gate's own retry is stored once) before
//                 it answers; the engine applies the stream in order, its cursor in its own commits.
//   KV svc_orgs      the orgs that exist, replicated by the engine so that every gate can refuse an unknown one.
//   KV svc_webhooks  the webhook registry the engine replicates to data planes (encrypted entries).
//   KV svc_progress  which webhooks a slow event has already had (so a redelivery repeats nothing else).
//
// The engine creates all of these; data planes only use them. On a JetStream cluster each is kept
// on `replicas` servers (CONTRACT 1 "NATS clusters"): created so, and an existing one scaled to it
// at start (its consumers follow the stream). With 3, losing one server loses no acknowledged
// message: JetStream acknowledges a publish once a majority of the replicas stored it.
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type JetStreamManager,
  type JsMsg,
  type StreamConfig,
} from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { headers as natsHeaders, nanos, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { jetstream } from '@nats-io/jetstream';
import { foregroundClock, sleep, type Clock } from '../../domain/clock.ts';
import { factsWildcard, hopWildcard, ingestWildcard, outcomesWildcard, subjectsOverlap } from '../subjects.ts';

export const EVENTS_STREAM = 'SVC_EVENTS';
export const DISPATCH_CONSUMER = 'svc-dispatch';
export const OUTCOMES_STREAM = 'SVC_OUTCOMES';
export const OUTCOMES_CONSUMER = 'svc-engine';
export const REGISTRY_BUCKET = 'svc_webhooks';
export const FACTS_STREAM = 'SVC_FACTS';
export const ORGS_BUCKET = 'svc_orgs';
/** How long SVC_FACTS keeps a fact (applied or not): what a standby or an empty disk can replay (CONTRACT 9). */
export const FACTS_MAX_AGE_MS = 7 * 24 * 3600_000;
/** A gate's retry of a publish whose answer it lost is stored once within this window. */
export const FACTS_DEDUPE_WINDOW_MS = 10 * 60_000;
export const PROGRESS_BUCKET = 'svc_progress';

/**
 * An event not acked within this long goes to another data plane; a holder signals `working()`
 * well before (src/dataplane/sources/jetstream/source.ts). It is also how long the events a killed data
 * plane held wait before anyone else may take them — for a slow webhook that is its whole share of
 * the backlog, up to the pipeline's 5000 events — so it is the recovery time after a kill -9
 * (test/system/ledger.test.ts). Short, then: the `working()` heartbeat keeps slow events with their holder.
 * It must stay well above a pull request's lifetime (2 s), so that what a killed plane held comes
 * back only after its pull requests are gone (see nats-server#5305 in sources/jetstream/server-defects.ts).
 */
export const EVENT_ACK_WAIT_MS = 10_000;
/** JetStream's duplicate window for event ids (a relay that republishes after a crash). */
export const EVENT_DEDUPE_WINDOW_MS = 10 * 60_000;
/**
 * An event or outcome batch stored this long after it was sealed is a replay (CONTRACT 6.7,
 * src/dataplane/sources/jetstream/source.ts). It covers the clock difference between the sealer's host and
 * the nats-server's, and the publish latency (a publish times out after 10 s; one the NATS client
 * held during a reconnect waits at most its dial timeout, 20 s). Shorter than both duplicate
 * windows: any copy stored within it is a JetStream duplicate.
 */
export const REPLAY_WINDOW_MS = 2 * 60_000;
/** Events handed out and not yet acked, all data planes together (each bounds its own share). */
export const EVENT_MAX_ACK_PENDING = 100_000;
const PROGRESS_TTL_MS = 24 * 3_600_000;
const OUTCOMES_MAX_AGE_MS = 24 * 3_600_000;
/** JetStream's duplicate window for outcome batch ids (a data plane that sends a batch again). */
const OUTCOMES_DEDUPE_WINDOW_MS = 10 * 60_000;

/** The seal of a batch of events (src/bus/hop.ts; besides Nats-Msg-Id = the batch id), or of an outcome batch. */
export const SEAL_HEADER = 'Svc-Seal';
export const EVENT_ID_HEADER = 'Nats-Msg-Id';

/** When JetStream stored a message (ms since the epoch, the server's clock): what replays are judged by. */
export function storedAtMs(m: JsMsg): number {
  return Number(m.info.timestampNanos) / 1e6;
}

export function sealHeaders(seal: string): MsgHdrs {
  const h = natsHeaders();
  h.set(SEAL_HEADER, seal);
  return h;
}

type StreamCfg = Partial<StreamConfig> & { name: string };

const eventsStream = (): StreamCfg => ({
  name: EVENTS_STREAM,
  subjects: [hopWildcard],
  retention: RetentionPolicy.Workqueue,
  storage: StorageType.File,
  duplicate_window: nanos(EVENT_DEDUPE_WINDOW_MS),
});

const dispatchConsumer = (): Partial<ConsumerConfig> => ({
  durable_name: DISPATCH_CONSUMER,
  description: 'svc delivery (shared by every data plane)',
  ack_policy: AckPolicy.Explicit,
  deliver_policy: DeliverPolicy.All,
  ack_wait: nanos(EVENT_ACK_WAIT_MS),
  max_deliver: -1,
  max_ack_pending: EVENT_MAX_ACK_PENDING,
  filter_subject: hopWildcard,
});

const outcomesStream = (): StreamCfg => ({
  name: OUTCOMES_STREAM,
  subjects: [outcomesWildcard],
  retention: RetentionPolicy.Workqueue,
  storage: StorageType.File,
  max_age: nanos(OUTCOMES_MAX_AGE_MS),
  duplicate_window: nanos(OUTCOMES_DEDUPE_WINDOW_MS),
});

const factsStream = (): StreamCfg => ({
  name: FACTS_STREAM,
  subjects: [factsWildcard],
  retention: RetentionPolicy.Limits,
  storage: StorageType.File,
  max_age: nanos(FACTS_MAX_AGE_MS),
  duplicate_window: nanos(FACTS_DEDUPE_WINDOW_MS),
  deny_delete: true,
  deny_purge: true,
});

const outcomesConsumer = (): Partial<ConsumerConfig> => ({
  durable_name: OUTCOMES_CONSUMER,
  description: 'svc engine: delivery outcomes',
  ack_policy: AckPolicy.Explicit,
  deliver_policy: DeliverPolicy.All,
  ack_wait: nanos(30_000),
  max_deliver: -1,
  filter_subject: outcomesWildcard,
});

/** The streams behind the layout's KV buckets. */
export const kvStreamName = (bucket: string) => `KV_${bucket}`;
/** Every stream svc needs (the buckets' included). */
export const LAYOUT_STREAMS = [
  EVENTS_STREAM,
  OUTCOMES_STREAM,
  FACTS_STREAM,
  kvStreamName(REGISTRY_BUCKET),
  kvStreamName(PROGRESS_BUCKET),
  kvStreamName(ORGS_BUCKET),
] as const;
/** The durable consumers svc needs, by stream. */
export const LAYOUT_CONSUMERS = [
  { stream: EVENTS_STREAM, consumer: DISPATCH_CONSUMER },
  { stream: OUTCOMES_STREAM, consumer: OUTCOMES_CONSUMER },
] as const;

/**
 * JetStream did not answer (a timeout) or said it is temporarily unavailable (10008: the meta group,
 * or the stream or consumer asked about, has no leader yet): on a cluster, an election under way,
 * which ends by itself.
 */
export function electionUnderWay(err: unknown): boolean {
  return err instanceof Error && (err.name === 'TimeoutError' || /timeout|temporarily unavailable/i.test(err.message));
}

/**
 * Events of SVC_EVENTS not yet done: waiting for a worker, or handed to one and not acked; null
 * while the consumer cannot tell (electionUnderWay: electing its leader after a server's loss).
 * Asked of the consumer, not the stream: on a cluster, nats-server 2.9 can keep messages in a
 * work-queue stream that its consumer has acked (seen after a leader election: 41 messages held, ack
 * floor 41, nothing pending), and nothing delivers them again.
 */
export async function undeliveredEvents(jsm: JetStreamManager): Promise<number | null> {
  try {
    const c = await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER);
    return c.num_pending + c.num_ack_pending;
  } catch (err) {
    if (electionUnderWay(err)) return null;
    throw err;
  }
}

/**
 * The servers of the JetStream cluster the connection is on, as the server tells: the client URLs
 * of its cluster (its INFO's connect_urls, itself included); 1 when it is in no cluster, or does
 * not tell (no_advertise).
 */
export function clusterSize(nc: NatsConnection): number {
  const info = nc.info;
  if (!info?.cluster || !info.jetstream) return 1;
  return Math.max(1, new Set(info.connect_urls ?? []).size);
}

/** The replica count when --nats-replicas is not given (CONTRACT 1): 3 on a cluster of 3 or more, else 1. */
export function defaultReplicas(nc: NatsConnection): number {
  return clusterSize(nc) >= 3 ? 3 : 1;
}

export interface LayoutOptions {
  /** --nats-replicas; null or absent: defaultReplicas(), and an existing stream is never scaled down to it */
  replicas?: number | null;
  /** where "scaled" lines go */
  logger?: { info(o: object, m?: string): void };
  /** what waiting for a scaled stream's replicas runs on (real time that holds the process open by default) */
  clock?: Clock;
}

/** How many replicas a stream should have, and whether an existing one is scaled to it. */
interface ReplicaPlan {
  replicas: number;
  /** an explicit count: existing streams are scaled up or down to it; a default only scales up */
  explicit: boolean;
  logger?: LayoutOptions['logger'];
  clock: Clock;
}

/**
 * Scale an existing stream to the plan (a default never scales down: a server that is away when svc
 * starts makes the cluster look smaller than it is).
 */
async function ensureReplicas(jsm: JetStreamManager, name: string, have: number, plan: ReplicaPlan): Promise<void> {
  const want = plan.explicit ? plan.replicas : Math.max(plan.replicas, have);
  if (want === have) return;
  const consumers = LAYOUT_CONSUMERS.filter((c) => c.stream === name);
  // svc's consumers are scaled with their stream, explicitly: nats-server 2.9 moves a consumer that
  // inherits its replica count along with its stream, but such a consumer was seen to elect no
  // leader after the loss of a server (a consumer without a leader hands out nothing). A consumer
  // has no more replicas than its stream: up, the stream first; down, the consumers first.
  const scaleConsumers = async () => {
    for (const c of consumers) {
      await jsm.consumers.update(name, c.consumer, { num_replicas: want }).catch((err: unknown) => {
        // not made yet: it is created with the count
        if (!isApiError(err, JetStreamApiCodes.ConsumerNotFound)) throw err;
      });
    }
  };
  if (want < have) await scaleConsumers();
  await jsm.streams.update(name, { num_replicas: want });
  // said once the server took it: a start cut short after this (and set up again) finds it scaled
  plan.logger?.info({ stream: name, from: have, to: want }, `scaled JetStream stream ${name} from ${have} to ${want} replicas`);
  if (want > have) await scaleConsumers();
  // the new replicas catch up, and the stream (and its consumers) may elect a leader anew: what
  // comes next (a consumer's info, the first publish) waits for that
  await waitForReplicas(jsm, name, want, plan.clock);
}

const SCALE_WAIT_MS = 30_000;

/** Resolves once `name` has a leader and `replicas - 1` current followers; rejects after SCALE_WAIT_MS. */
async function waitForReplicas(jsm: JetStreamManager, name: string, replicas: number, clock: Clock): Promise<void> {
  const end = clock.now() + SCALE_WAIT_MS;
  let last = '';
  for (;;) {
    try {
      const c = (await jsm.streams.info(name)).cluster;
      const current = (c?.replicas ?? []).filter((p) => p.current).length;
      if (c?.leader && current >= replicas - 1) return;
      last = `leader ${c?.leader ?? 'none'}, ${current} of ${replicas - 1} followers current`;
    } catch (err) {
      last = (err as Error)?.message ?? String(err);
    }
    if (clock.now() > end)
      throw new Error(`JetStream stream ${name} was not on ${replicas} servers within ${SCALE_WAIT_MS / 1000} s (${last})`);
    await sleep(clock, 200);
  }
}

const isApiError = (err: unknown, code: number) => err instanceof JetStreamApiError && err.code === code;

/** Create the stream, or bring an existing one in line (a stream of another retention is recreated when empty). */
async function ensureStream(jsm: JetStreamManager, base: StreamCfg, plan: ReplicaPlan): Promise<void> {
  const cfg: StreamCfg = { ...base, num_replicas: plan.replicas };
  const name = cfg.name;
  let info;
  try {
    info = await jsm.streams.info(name);
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.StreamNotFound)) throw err;
    try {
      await jsm.streams.add(cfg);
    } catch (addErr) {
      // another svc process created it meanwhile
      await jsm.streams.info(name).catch(() => {
        throw addErr;
      });
    }
    return;
  }
  if (info.config.retention !== cfg.retention) {
    if (info.state.messages > 0) {
      throw new Error(
        `JetStream stream ${name} has retention ${info.config.retention} and ${info.state.messages} messages; ` +
          `svc needs ${cfg.retention}. Let an older svc deliver them, or remove the stream (nats stream rm ${name}).`,
      );
    }
    await jsm.streams.delete(name);
    await jsm.streams.add(cfg);
    return;
  }
  const c = info.config;
  if (JSON.stringify(c.subjects) !== JSON.stringify(cfg.subjects) && info.state.messages > 0) {
    // an older svc's queue (SVC_EVENTS on svc.events.>, one event per message): nothing here reads it
    throw new Error(
      `JetStream stream ${name} holds ${info.state.messages} messages on ${(c.subjects ?? []).join(', ')}, queued by an older svc; ` +
        `this one queues on ${(cfg.subjects ?? []).join(', ')}. ` +
        'Let the older svc deliver them first (its svc serve and workers, until the stream is empty), ' +
        `or remove the stream (nats stream rm ${name}).`,
    );
  }
  if (
    JSON.stringify(c.subjects) !== JSON.stringify(cfg.subjects) ||
    c.duplicate_window !== (cfg.duplicate_window ?? c.duplicate_window) ||
    c.max_age !== (cfg.max_age ?? 0)
  ) {
    await jsm.streams.update(name, {
      subjects: cfg.subjects,
      duplicate_window: cfg.duplicate_window ?? c.duplicate_window,
      max_age: cfg.max_age ?? 0,
    });
  }
  await ensureReplicas(jsm, name, c.num_replicas, plan);
}

const streamReplicas = async (jsm: JetStreamManager, name: string) => (await jsm.streams.info(name)).config.num_replicas;

/** Create the KV bucket, or scale an existing one to the plan (nothing else of a bucket changes). */
async function ensureBucket(
  nc: NatsConnection,
  jsm: JetStreamManager,
  bucket: string,
  opts: { ttl?: number },
  plan: ReplicaPlan,
): Promise<void> {
  // create() leaves an existing bucket as it is
  await new Kvm(jetstream(nc)).create(bucket, { history: 1, storage: StorageType.File, replicas: plan.replicas, ...opts });
  const name = kvStreamName(bucket);
  await ensureReplicas(jsm, name, (await jsm.streams.info(name)).config.num_replicas, plan);
}

async function ensureConsumer(jsm: JetStreamManager, stream: string, cfg: Partial<ConsumerConfig>): Promise<void> {
  try {
    const c = (await jsm.consumers.info(stream, cfg.durable_name!)).config;
    if (cfg.filter_subject && c.filter_subject !== cfg.filter_subject) {
      // an older svc's consumer (svc.events.>): nats-server 2.9 cannot change a filter in place; what
      // the stream holds stays there for the new consumer (deliver policy all)
      await jsm.consumers.delete(stream, cfg.durable_name!);
      await jsm.consumers.add(stream, cfg);
      return;
    }
    // a consumer left behind by a scale of its stream that did not finish (a start cut short) is
    // scaled now; one that inherits its stream's count (0) and has it is left alone
    const replicas =
      cfg.num_replicas !== undefined && c.num_replicas !== 0 && c.num_replicas !== cfg.num_replicas
        ? { num_replicas: cfg.num_replicas }
        : {};
    if (
      c.ack_wait !== cfg.ack_wait ||
      c.max_deliver !== cfg.max_deliver ||
      c.max_ack_pending !== cfg.max_ack_pending ||
      c.description !== cfg.description ||
      'num_replicas' in replicas
    ) {
      await jsm.consumers.update(stream, cfg.durable_name!, {
        ack_wait: cfg.ack_wait,
        max_deliver: cfg.max_deliver,
        description: cfg.description,
        ...(cfg.max_ack_pending !== undefined ? { max_ack_pending: cfg.max_ack_pending } : {}),
        ...replicas,
      });
    }
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.ConsumerNotFound)) throw err;
    // adding a durable with an identical config is idempotent, so a concurrent start is fine
    await jsm.consumers.add(stream, cfg);
  }
}

/** Refuses to run when a stream would capture ingest subjects: it would answer producers' requests itself. */
async function checkIngestNotCaptured(jsm: JetStreamManager): Promise<void> {
  for await (const si of jsm.streams.list()) {
    const hit = (si.config.subjects ?? []).find((s) => subjectsOverlap(s, ingestWildcard));
    if (hit) {
      throw new Error(
        `JetStream stream ${si.config.name} captures ${hit}, which overlaps ${ingestWildcard}: ` +
          'it would answer ingest requests itself (producers would think unrecorded facts were recorded). ' +
          'Remove that subject from the stream.',
      );
    }
  }
}

/**
 * The engine's part: every stream, consumer and bucket of the layout, created or brought in line,
 * each on `replicas` servers. Resolves the replica count it used.
 */
export async function ensureLayout(nc: NatsConnection, jsm: JetStreamManager, opts: LayoutOptions = {}): Promise<{ replicas: number }> {
  const explicit = opts.replicas !== undefined && opts.replicas !== null;
  const plan: ReplicaPlan = {
    replicas: explicit ? opts.replicas! : defaultReplicas(nc),
    explicit,
    logger: opts.logger,
    clock: opts.clock ?? foregroundClock,
  };
  await layoutStep('the streams', () => checkIngestNotCaptured(jsm));
  await layoutStep(`stream ${EVENTS_STREAM}`, () => ensureStream(jsm, eventsStream(), plan));
  const dispatch = dispatchConsumer();
  await layoutStep(`consumer ${EVENTS_STREAM}/${dispatch.durable_name}`, async () =>
    ensureConsumer(jsm, EVENTS_STREAM, { ...dispatch, num_replicas: await streamReplicas(jsm, EVENTS_STREAM) }),
  );
  await layoutStep(`stream ${OUTCOMES_STREAM}`, () => ensureStream(jsm, outcomesStream(), plan));
  const outcomes = outcomesConsumer();
  await layoutStep(`consumer ${OUTCOMES_STREAM}/${outcomes.durable_name}`, async () =>
    ensureConsumer(jsm, OUTCOMES_STREAM, { ...outcomes, num_replicas: await streamReplicas(jsm, OUTCOMES_STREAM) }),
  );
  await layoutStep(`stream ${FACTS_STREAM}`, () => ensureStream(jsm, factsStream(), plan));
  await layoutStep(`bucket ${REGISTRY_BUCKET}`, () => ensureBucket(nc, jsm, REGISTRY_BUCKET, {}, plan));
  await layoutStep(`bucket ${PROGRESS_BUCKET}`, () => ensureBucket(nc, jsm, PROGRESS_BUCKET, { ttl: PROGRESS_TTL_MS }, plan));
  await layoutStep(`bucket ${ORGS_BUCKET}`, () => ensureBucket(nc, jsm, ORGS_BUCKET, {}, plan));
  return { replicas: plan.replicas };
}

/**
 * One part of the layout; its error names the part (`consumer SVC_EVENTS/dispatch: timeout`): on
 * a cluster, what does not answer is one stream's or consumer's group, not JetStream as a whole.
 */
async function layoutStep(what: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    if (!(err instanceof Error)) throw err;
    const named = new Error(`${what}: ${err.message}`, { cause: err });
    named.name = err.name; // electionUnderWay() and callers still see a TimeoutError as one
    throw named;
  }
}
