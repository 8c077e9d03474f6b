// NATS mode (`svc serve --nats`): the control plane here, the data plane on JetStream. This process
// connects (the engine's credentials), makes sure of the JetStream layout (src/bus/nats/jetstream.ts),
// replicates webhooks into KV (sealed with the data plane key) and the orgs into the org directory
// (src/handoff/org-replicator.ts; this process's ingest gate reads it back like any other's), relays the outbox to SVC_EVENTS
// (src/handoff/outbox-relay.ts: batch assignment and the prune ride in the engine's commits), takes
// the outcome batches of every data plane back into the status book, and — unless --no-deliver —
// delivers: on N worker threads (src/dataplane/nats-threads.ts), or on this thread
// (--delivery-threads 0). svc worker processes anywhere share the same durable consumer.
// On a JetStream cluster (CONTRACT 1 "NATS clusters"): --nats is a seed list, every stream and
// bucket is kept on --nats-replicas servers, and /readyz is 503 while one of them has no leader.
import os from 'node:os';
import { randomUUID } from 'node:crypto';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { retry, systemClock } from '../domain/clock.ts';
import { resolveDataplaneKey } from '../bus/nats/dataplane-key.ts';
import {
  electionUnderWay,
  ensureLayout,
  EVENTS_STREAM,
  LAYOUT_CONSUMERS,
  LAYOUT_STREAMS,
  ORGS_BUCKET,
  REGISTRY_BUCKET,
  undeliveredEvents,
} from '../bus/nats/jetstream.ts';
import { JetStreamPublisher } from '../bus/nats/jetstream-publisher.ts';
import { KvRegistryPublisher } from '../bus/nats/kv-registry.ts';
import { KvOrgsPublisher } from '../bus/nats/kv-orgs.ts';
import { natsConnectOptions } from '../bus/nats/nats-auth.ts';
import { createNatsBus, redactNatsUrl, type NatsBus } from '../bus/nats/nats-connection.ts';
import { Seal } from '../bus/seal.ts';
import { startNatsDataPlane, type DataPlane, type DeliveryLimits } from '../dataplane/data-plane.ts';
import { NatsDeliveryThreads } from '../dataplane/nats-threads.ts';
import { OutboxRelay } from '../handoff/outbox-relay.ts';
import { OrgReplicator } from '../handoff/org-replicator.ts';
import { historyQueue, outboxQueue } from '../handoff/relay-queues.ts';
import { relayEventQueue } from '../handoff/relay-event-queue.ts';
import { consumeOutcomes } from '../outcomes/consumer.ts';
import { trackNatsConnection } from '../readiness.ts';
import type { Topology, TopologyDeps } from './topology.ts';
import { watchStreamLeaders, type StreamLeaderWatch } from './stream-leaders.ts';
import { INBOX_PREFIX } from '../bus/subjects.ts';
import { getOrg } from '../../store/orgs.ts';
import { applyFactStream } from '../ingest/fact-stream.ts';
import { startGate } from '../ingest/gate.ts';
import type { OrgDirectory } from '../domain/org-directory.ts';

/** Delivery threads for this machine: one per spare core, at least one. */
export function defaultDeliveryThreads(): number {
  return Math.max(1, (os.availableParallelism?.() ?? os.cpus().length) - 1);
}

/** Connected, with the layout in place; rejects (the connection closed) when NATS cannot be set up. */
async function connect(d: TopologyDeps, natsUrl: string): Promise<NatsBus> {
  const { config, logger } = d;
  if (!config.natsCreds)
    logger.warn(
      { url: redactNatsUrl(natsUrl) },
      'no --nats-creds: anyone who can reach this NATS server can act as any org (see svc nats init)',
    );
  const nats = await createNatsBus(natsUrl, { name: 'svc', logger, role: 'engine', credsFile: config.natsCreds });
  trackNatsConnection(nats.nc, d.readiness);
  try {
    const jsm = await jetstreamManager(nats.nc, { timeout: 10_000, checkAPI: false });
    const { replicas } = await retryDuringElection(d, () => ensureLayout(nats.nc, jsm, { replicas: config.natsReplicas ?? null, logger }));
    logger.info(
      { replicas, server: nats.nc.info?.server_name, cluster: nats.nc.info?.cluster ?? null },
      `JetStream layout in place: ${replicas} replica${replicas === 1 ? '' : 's'} per stream and bucket`,
    );
  } catch (err) {
    await nats.close();
    const msg = (err as Error)?.message ?? String(err);
    const hint = /jetstream (is )?not enabled|JetStreamNotEnabled|503/i.test(msg) ? ' (start nats-server with JetStream enabled: -js)' : '';
    throw new Error(`NATS setup failed at ${redactNatsUrl(natsUrl)}: ${msg}${hint}`, { cause: err });
  }
  return nats;
}

/** How long a start waits for JetStream to answer again (a cluster electing leaders after a server's loss takes seconds). */
const SETUP_ELECTION_WAIT_MS = 60_000;

/**
 * `fn` again while JetStream does not answer (a timeout) or says it is temporarily unavailable: on a
 * cluster that is an election under way (a server that led a stream or consumer, or the meta group,
 * is gone), and it ends by itself.
 * Any other error is final.
 */
async function retryDuringElection<T>(d: TopologyDeps, fn: () => Promise<T>): Promise<T> {
  const end = systemClock.now() + SETUP_ELECTION_WAIT_MS;
  const r = await retry(
    systemClock,
    {
      delayMs: () => 500,
      retryable: (err) => electionUnderWay(err) && systemClock.now() <= end,
      onError: (err, attempt) => {
        // the first time, then every 10th (about every 5 s plus the requests' own timeouts): which part still does not answer
        if (attempt % 10 === 1)
          d.logger.warn(
            { err: (err as Error).message, attempt },
            'JetStream did not answer (a cluster electing leaders?); setting up again',
          );
      },
    },
    fn,
  );
  return r as T; // never undefined: nothing stops it but success or an error thrown
}

export async function natsTopology(d: TopologyDeps, natsUrl: string): Promise<Topology> {
  const { config, db, logger, metrics, readiness } = d;
  readiness.notReady('delivery', 'the outbox relay and the consumers have not started yet');
  const key = resolveDataplaneKey(db, config.natsCreds);
  const seal = new Seal(key);
  const nats = await connect(d, natsUrl);
  const js = jetstream(nats.nc, { timeout: 10_000 });
  const jsm = await jetstreamManager(nats.nc, { timeout: 10_000, checkAPI: false });
  const registry = new KvRegistryPublisher(await retryDuringElection(d, () => new Kvm(js).open(REGISTRY_BUCKET)), seal);
  // the org directory every svc worker's gate reads: put from the store (begun now, behind: start()
  // waits for it a few seconds at most); this process's own gate reads the store itself
  const orgReplicator = new OrgReplicator(
    db,
    new KvOrgsPublisher(await retryDuringElection(d, () => new Kvm(js).open(ORGS_BUCKET))),
    logger,
  );
  const orgsReplicated = orgReplicator.start();
  const publisher = new JetStreamPublisher(nats.nc, natsConnectOptions({ servers: [], name: 'svc', role: 'engine' }).inboxPrefix!);
  // each gives its rows their batch (in the engine's commits, and a recovery's for the outbox) and
  // is done with what JetStream stored inside the engine's next commit: the outbox relay deletes
  // those rows, the history's moves its cursor on (emitted events are queued in their history row
  // when a history is kept, src/handoff/relay-queues.ts)
  const relay = new OutboxRelay(db, publisher, seal, logger, metrics, systemClock, d.relayFault ?? null, outboxQueue(db));
  const historyRelay = new OutboxRelay(db, publisher, seal, logger, metrics, systemClock, d.relayFault ?? null, historyQueue(db));
  const relays = [relay, historyRelay];
  const limits: DeliveryLimits = {
    concurrency: config.deliveryConcurrency,
    timeoutMs: config.deliveryTimeoutMs,
    allowPrivateTargets: config.allowPrivateTargets,
  };
  const delivery = natsDelivery(d, natsUrl, nats.nc, key, seal, limits);
  let started = false;
  let outcomes: { stop(): Promise<void> } = { stop: async () => {} };
  let leaders: StreamLeaderWatch | null = null;

  return {
    bus: nats,
    registry,
    // rows committed before start are in the tables: the relays read them first when they start
    queue: relayEventQueue(db, relay, historyRelay, () => started),
    historyQueuedFrom: () => historyRelay.unstoredFrom(),
    delivery: delivery.name,
    async startIngest(w) {
      // this process's gate, beside every other svc process's (CONTRACT 9); the orgs it knows are the database's
      const gate = startGate({
        nc: nats.nc,
        logger,
        metrics,
        clock: systemClock, // a wait for a verdict is real time, whatever the engine's clock
        gateId: `serve_${randomUUID().slice(0, 8)}`,
        inboxPrefix: INBOX_PREFIX.engine,
        orgs: databaseOrgs(db),
        ratePerOrg: w.ratePerOrg,
        readiness,
      });
      const facts = await retryDuringElection(d, () =>
        applyFactStream({
          js,
          nc: nats.nc,
          db,
          engine: w.engine,
          logger,
          metrics,
          clock: systemClock,
          refused: w.refused,
          backlogged: w.backlogged,
        }),
      );
      return {
        async drain() {
          await gate.drain();
          await facts.stop();
        },
      };
    },
    async start() {
      started = true;
      await orgsReplicated; // the first sync, or a few seconds of it (it goes on behind)
      // a stream without a leader (an election on a cluster) is a reason not to be ready (CONTRACT 1);
      // a lone server holds no elections (and a slow answer of its own is no reason to be unready)
      if (nats.nc.info?.cluster) {
        leaders = watchStreamLeaders({
          jsm: await jetstreamManager(nats.nc, { timeout: 2000, checkAPI: false }),
          targets: [...LAYOUT_STREAMS.map((stream) => ({ stream })), ...LAYOUT_CONSUMERS],
          readiness,
          clock: systemClock,
          nc: nats.nc,
          // what the relay published while SVC_EVENTS had no leader was dropped unanswered
          onLeader: (t) => {
            if (t.stream === EVENTS_STREAM && !t.consumer) relays.forEach((r) => r.leaderElected());
          },
        });
      }
      outcomes = await retryDuringElection(d, () => consumeOutcomes(js, seal, d.outcomes, logger, { replayWindowMs: d.replayWindowMs }));
      await delivery.start();
      relays.forEach((r) => r.kick()); // what was committed before a stop or a crash and not yet published
      readiness.ready('delivery'); // the relay runs, the consumers and delivery threads pull (each confirmed)
    },
    async idle() {
      if (!delivery.idle() || !historyRelay.idle()) return false;
      // a consumer that cannot tell (null: electing its leader) is not known idle
      return (await undeliveredEvents(jsm)) === 0;
    },
    drain: () => delivery.drain(),
    async close() {
      leaders?.stop();
      await orgReplicator.stop();
      await Promise.all(relays.map((r) => r.close()));
      publisher.close();
      await outcomes.stop();
    },
  };
}

/** Where this process delivers in NATS mode: worker threads, this thread, or nowhere (--no-deliver: svc worker processes do). */
interface NatsDelivery {
  readonly name: string;
  start(): Promise<void>;
  /** nothing held or in flight here */
  idle(): boolean;
  drain(): Promise<void>;
}

function natsDelivery(d: TopologyDeps, natsUrl: string, nc: NatsConnection, key: Buffer, seal: Seal, limits: DeliveryLimits): NatsDelivery {
  const { config, logger } = d;
  if (!config.deliver) return { name: 'off', start: async () => {}, idle: () => true, drain: async () => {} };
  const n = config.deliveryThreads ?? defaultDeliveryThreads();
  const workerId = `serve_${randomUUID().slice(0, 8)}`;
  if (n > 0) {
    const perThread = { ...limits, concurrency: Math.max(1, Math.ceil(limits.concurrency / n)) };
    const threads = new NatsDeliveryThreads(
      n,
      {
        natsUrl,
        credsFile: config.natsCreds,
        key: key.toString('base64'),
        limits: perThread,
        workerIdPrefix: workerId,
        logLevel: logger.level,
      },
      logger,
      d.outcomes,
    );
    return { name: `${n} threads`, start: () => threads.start(), idle: () => true, drain: () => threads.drain() };
  }
  let plane: DataPlane | null = null;
  return {
    name: 'in process',
    async start() {
      plane = await startNatsDataPlane({
        nc,
        seal,
        limits,
        workerId,
        clock: systemClock,
        logger,
        replayWindowMs: d.replayWindowMs,
        outcomes: d.outcomes,
      });
    },
    idle: () => !plane || (plane.pipeline.held() === 0 && plane.pipeline.inFlight() === 0),
    drain: async () => plane?.drain(),
  };
}

/** The orgs of the engine's own database, for its gate (an org once seen is remembered: orgs are not deleted). */
function databaseOrgs(db: TopologyDeps['db']): OrgDirectory {
  const known = new Set<string>();
  return {
    synced: true,
    whenSynced: async () => {},
    has(orgId) {
      if (known.has(orgId)) return true;
      if (!getOrg(db, orgId)) return false;
      known.add(orgId);
      return true;
    },
  };
}
