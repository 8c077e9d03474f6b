// A data plane: registry + pipeline + deliverer, fed by an event source (sources/): from JetStream
// (NATS mode: a worker thread of svc serve, or a svc worker process anywhere) or from the outbox
// (embedded mode). In NATS mode it reads no SQLite: webhooks arrive replicated, events carry their
// route, outcomes go back in batches.
import type { Logger } from 'pino';
import { jetstream } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Db } from '../../store/db.ts';
import type { DeliveryLedger } from '../../store/outbox.ts';
import { retry, systemClock, type Clock } from '../domain/clock.ts';
import { encodeOutcomeBatch, type OutcomeBatch } from '../outcomes/outcome.ts';
import { PROGRESS_BUCKET, REGISTRY_BUCKET, sealHeaders } from '../bus/nats/jetstream.ts';
import { outcomesSubject } from '../bus/subjects.ts';
import { watchRegistry } from '../bus/nats/kv-registry.ts';
import type { Seal } from '../bus/seal.ts';
import type { WebhookEntry } from '../domain/webhook-entry.ts';
import { WebhookRegistry } from '../dispatch/registry.ts';
import { Deliverer } from '../delivery/client.ts';
import { DeliveryPipeline, type ProgressStore } from './pipeline.ts';
import { BatchingOutcomeSink } from '../outcomes/batching-sink.ts';
import { JetStreamSource } from './sources/jetstream/source.ts';
import { KvProgress } from './sources/jetstream/progress.ts';
import { OutboxSource } from './sources/outbox-source.ts';
import { makeSigner } from './signer.ts';

export interface DeliveryLimits {
  /** attempts in flight at most (CONTRACT 1 --delivery-concurrency) */
  concurrency: number;
  timeoutMs: number;
  allowPrivateTargets: boolean;
}

export interface DataPlane {
  readonly pipeline: DeliveryPipeline;
  readonly registry: WebhookRegistry;
  /** SIGTERM: take nothing more, finish attempts in flight, leave the rest queued. */
  drain(): Promise<void>;
}

/** A KV bucket, waited for while svc serve has not created it yet (or until the plane stops). */
async function openBucket(kvm: Kvm, name: string, clock: Clock, logger: Logger, stopped: () => boolean): Promise<KV> {
  const kv = await retry(
    clock,
    {
      delayMs: () => 500,
      stopped,
      onError: (err, attempt) => {
        if (attempt === 1) logger.warn({ bucket: name, err: String(err) }, 'waiting for the KV bucket (svc serve creates it)');
      },
    },
    () => kvm.open(name),
  );
  if (!kv) throw new Error(`stopped while waiting for the KV bucket ${name}`);
  return kv;
}

/**
 * NATS mode: watch the replicated registry, then pull events from the shared durable consumer.
 * Resolves once the registry is loaded and pulling has started.
 */
export async function startNatsDataPlane(o: {
  nc: NatsConnection;
  seal: Seal;
  limits: DeliveryLimits;
  workerId: string;
  clock: Clock;
  logger: Logger;
  /** a test's shortened replay window (src/dataplane/sources/jetstream/source.ts) */
  replayWindowMs?: number;
  /**
   * Where outcome batches go when this data plane runs inside svc serve (a delivery thread, whose
   * port carries them, or the engine's own thread): handed over in process, nothing on
   * svc.outcomes. Without it (svc worker) they are sealed and published on SVC_OUTCOMES.
   */
  outcomes?: (batch: OutcomeBatch) => void;
}): Promise<DataPlane> {
  const js = jetstream(o.nc);
  const kvm = new Kvm(js);
  let stopping = false;
  const registryKv = await openBucket(kvm, REGISTRY_BUCKET, o.clock, o.logger, () => stopping);
  const progressKv = await openBucket(kvm, PROGRESS_BUCKET, o.clock, o.logger, () => stopping);
  const registry = new WebhookRegistry();
  // refused entries older than the one held, counted once the outcome batches exist
  let stale = 0;
  let counted: ((reason: 'stale_registry') => void) | null = null;
  // on a cluster a request may go unanswered while leaders are elected (a server lost): tried again
  const watching = await retry(
    o.clock,
    {
      delayMs: () => 500,
      stopped: () => stopping,
      onError: (err, attempt) => {
        if (attempt === 1) o.logger.warn({ bucket: REGISTRY_BUCKET, err: String(err) }, 'could not watch the webhook registry; retrying');
      },
    },
    () =>
      watchRegistry(registryKv, o.seal, {
        apply: (orgId, webhookId, v, entry) => {
          if (entry ? registry.upsert(entry, v) : registry.remove(orgId, webhookId, v)) return;
          o.logger.warn({ org_id: orgId, webhook_id: webhookId, version: v }, 'a webhook registry entry older than the one held; refused');
          if (counted) counted('stale_registry');
          else stale++;
        },
        refused: (key) => o.logger.warn({ key }, 'a webhook registry entry does not open with the data plane key; ignored'),
      }),
  );
  if (!watching) throw new Error(`stopped while watching the KV bucket ${REGISTRY_BUCKET}`);
  const watch = watching;
  await watch.ready;

  const subject = outcomesSubject(o.workerId);
  const inProcess = o.outcomes;
  // sealed, with the time it is sent, and its id as Nats-Msg-Id (a copy sent again is a JetStream duplicate)
  const send = inProcess
    ? async (batch: OutcomeBatch) => inProcess({ ...batch, sent_at: o.clock.now() })
    : async (batch: OutcomeBatch) => {
        const body = encodeOutcomeBatch({ ...batch, sent_at: o.clock.now() });
        await js.publish(subject, body, { msgID: batch.id, headers: sealHeaders(o.seal.sealBatch(body)) });
      };
  const progress = new KvProgress(
    progressKv,
    o.seal,
    (batchId) => o.logger.warn({ batch_id: batchId }, 'a delivery progress record does not open with the data plane key; ignored'),
    (subject, data) => o.nc.publish(subject, data),
  );
  const parts = assemble({ worker: o.workerId, registry, progress, send, limits: o.limits, clock: o.clock, logger: o.logger });
  counted = (reason) => parts.sink.droppedEvent(reason);
  for (; stale > 0; stale--) counted('stale_registry');
  const source = new JetStreamSource({
    js,
    workerId: o.workerId,
    seal: o.seal,
    pipeline: parts.pipeline,
    progress,
    clock: o.clock,
    logger: o.logger,
    dropped: (r, events) => parts.sink.droppedEvent(r, events),
    replayWindowMs: o.replayWindowMs,
  });
  // what the source holds and settled lately outlives a lost connection (a nats-server restart)
  void (async () => {
    for await (const st of o.nc.status()) {
      if (st.type === 'disconnect') source.disconnected();
      else if (st.type === 'reconnect') void source.reconnected();
    }
  })();
  await source.start();
  // attached and pulling: the server has this connection's pull request (and every subscription)
  await o.nc.flush();
  return {
    pipeline: parts.pipeline,
    registry,
    async drain() {
      stopping = true;
      await source.stop();
      await parts.drain();
      await source.released();
      watch.stop();
    },
  };
}

/** A webhook at version v (entry null: deleted), as the registry replicator publishes it (embedded mode: by postMessage, or a call). */
export interface RegistryChange {
  orgId: string;
  webhookId: string;
  v: number;
  entry: WebhookEntry | null;
}

/** Embedded mode's data plane, on the thread that calls this: its registry, the outbox source over `db` and the pipeline it feeds. */
export interface OutboxDataPlane {
  readonly source: OutboxSource;
  /** a webhook changed (false: older than the version held) */
  apply(change: RegistryChange): boolean;
  /** nothing held, in flight, or waiting to be recorded */
  idle(): boolean;
  /** SIGTERM (CONTRACT 6.6): finish the attempts in flight, leave the rest in the outbox */
  drain(): Promise<void>;
}

/**
 * Embedded mode: fed by the outbox (sources/outbox-source.ts) on the same thread, which is a
 * delivery thread of its own (outbox-thread-entry.ts) unless the database cannot be opened twice;
 * outcome batches go to `outcomes` (the control plane's status book, or a postMessage to it).
 */
export function startOutboxDataPlane(o: {
  db: Db;
  /** the delivery thread's own records (null: on the engine's thread, written to the outbox itself) */
  ledger: DeliveryLedger | null;
  outcomes: (batch: OutcomeBatch) => void;
  limits: DeliveryLimits;
  logger: Logger;
}): OutboxDataPlane {
  const registry = new WebhookRegistry();
  const source = new OutboxSource(o.db, o.logger, (reason) => parts.sink.droppedEvent(reason), systemClock, o.ledger);
  const parts = assemble({
    worker: 'local',
    registry,
    progress: source,
    send: async (batch) => o.outcomes(batch),
    limits: o.limits,
    clock: systemClock,
    logger: o.logger,
  });
  source.attach(parts.pipeline);
  return {
    source,
    apply: (c) => (c.entry ? registry.upsert(c.entry, c.v) : registry.remove(c.orgId, c.webhookId, c.v)),
    // the outcomes sent too: the engine has them (and what they make, a watchdog's event) before it hears this
    idle: () => parts.pipeline.held() === 0 && parts.pipeline.inFlight() === 0 && !source.busy() && parts.sink.idle(),
    async drain() {
      await parts.drain();
      source.close();
    },
  };
}

/** What every data plane is made of: a deliverer, outcome batches and the pipeline over them. */
function assemble(o: {
  worker: string;
  registry: WebhookRegistry;
  progress: ProgressStore;
  send: (batch: OutcomeBatch) => Promise<void>;
  limits: DeliveryLimits;
  clock: Clock;
  logger: Logger;
}): { pipeline: DeliveryPipeline; sink: BatchingOutcomeSink; drain(): Promise<void> } {
  const deliverer = new Deliverer({ timeoutMs: o.limits.timeoutMs, allowPrivateTargets: o.limits.allowPrivateTargets, clock: o.clock });
  let pipeline: DeliveryPipeline;
  const sink = new BatchingOutcomeSink(
    o.worker,
    o.send,
    () => pipeline.inFlight(),
    o.clock,
    o.logger,
    () => pipeline.backlogReport(),
  );
  pipeline = new DeliveryPipeline({
    registry: o.registry,
    deliverer,
    sign: makeSigner(),
    outcomes: sink,
    progress: o.progress,
    clock: o.clock,
    logger: o.logger,
    concurrency: o.limits.concurrency,
    dropped: (reason, events) => sink.droppedEvent(reason, events),
    caughtUp: () => sink.caughtUp(),
    startAfterTurn: true,
  });
  return {
    pipeline,
    sink,
    /** finish the attempts in flight (the pipeline releases the rest), send the last outcomes, close the connections */
    async drain() {
      await pipeline.drain();
      sink.close();
      await sink.flush();
      await deliverer.close(0);
    },
  };
}
