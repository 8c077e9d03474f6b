// Embedded mode (`npm start`, no NATS): both planes in one process. The SQLite outbox is the durable
// queue; the data plane (the outbox source, pipeline, deliverer, outcome batches) runs on a thread
// of its own over its own SQLite connection (src/dataplane/outbox-thread.ts), as NATS mode's
// delivery threads do, so that the engine's thread only commits. A database that cannot be opened
// twice (':memory:') or --delivery-threads 0 keeps it on the engine's thread.
//
// What the engine's thread still does here: the in-process bus, the registry (the
// RegistryReplicator publishes each webhook change into it, and it forwards them to the data
// plane, secrets included: postMessage stays in the process), and the mirror of each committed
// event to plain subscribers of svc.events.> on the in-process bus (CONTRACT 5.2), once, when it is
// committed (a recovery's item is not mirrored: its subscribers saw the event already).
import type { Db } from '../../store/db.ts';
import { insertEvent } from '../../store/history.ts';
import { getOrg } from '../../store/orgs.ts';
import { insertOutbox, type OutboxRow } from '../../store/outbox.ts';
import { createMemoryBus } from '../bus/memory.ts';
import { startOutboxDataPlane, type DeliveryLimits, type RegistryChange } from '../dataplane/data-plane.ts';
import { OutboxDeliveryThread } from '../dataplane/outbox-thread.ts';
import { isRecoveryItemId } from '../domain/event-route.ts';
import type { OrgDirectory } from '../domain/org-directory.ts';
import type { RegistryPublisher } from '../handoff/registry-replicator.ts';
import { moveHistoryQueueToOutbox, passEmbeddedEvents } from '../handoff/relay-queues.ts';
import { type EventQueue, QueueWrites, queuedRow } from '../handoff/event-queue.ts';
import type { Topology, TopologyDeps } from './topology.ts';

/**
 * Embedded mode's EventQueue: an outbox row per event or item (this mode's queue), and the event's
 * history row too when it is kept; after a commit that queued rows, `changed` has them, in order.
 */
export function outboxEventQueue(db: Db, changed: (rows: OutboxRow[]) => void): EventQueue {
  return {
    open: () => new QueueWrites(1),
    write(w, item, kept) {
      w.lanes[0].push(queuedRow(item, insertOutbox(db, item, null), null));
      if (kept) insertEvent(db, kept);
    },
    commit() {},
    committed(w) {
      const rows = w.lanes[0];
      if (rows.length) changed(rows);
    },
    rolledBack() {},
  };
}

export function embeddedTopology(d: TopologyDeps): Topology {
  const { config, logger, readiness } = d;
  readiness.notReady('delivery', 'the outbox source and the data plane have not started yet');
  let started = false;
  // rows committed before start are in the outbox: the data plane reads it first when it starts
  const queue = outboxEventQueue(d.db, (rows) => {
    if (!started) return;
    for (const row of rows) {
      if (isRecoveryItemId(row.event_id)) continue; // observers saw the event already
      try {
        bus.publish(row.subject, row.body);
      } catch {
        // the bus is closing
      }
    }
    delivery.kick();
  });
  // the outbox is this mode's queue: events a NATS-mode run left queued in the history join it
  const moved = moveHistoryQueueToOutbox(d.db, queue);
  if (moved) logger.info({ events: moved }, 'events queued by a NATS-mode run and not yet published moved to the outbox');
  const bus = createMemoryBus({ logger });
  const limits: DeliveryLimits = {
    concurrency: config.deliveryConcurrency,
    timeoutMs: config.deliveryTimeoutMs,
    allowPrivateTargets: config.allowPrivateTargets,
  };
  // the newest version of every webhook (null entry: deleted), what a delivery thread loads first
  const webhooks = new Map<string, RegistryChange>();
  const useThread = config.deliveryThreads !== 0 && config.db !== ':memory:';
  const delivery = useThread ? threadDelivery(d, limits, () => [...webhooks.values()]) : inProcessDelivery(d, limits);
  const registry: RegistryPublisher = {
    async publish(orgId, webhookId, v, entry) {
      const key = `${orgId}.${webhookId}`;
      const held = webhooks.get(key);
      if (held && held.v > v) return;
      const change: RegistryChange = { orgId, webhookId, v, entry };
      webhooks.set(key, change);
      delivery.registryChanged(change);
    },
    // nothing survives a restart in process: the RegistryReplicator publishes every webhook at start
    async replicated() {
      return new Map();
    },
  };

  // one process, one store: it is the directory
  const orgs: OrgDirectory = { has: (orgId) => getOrg(d.db, orgId) !== undefined, synced: true, whenSynced: async () => {} };

  return {
    bus,
    registry,
    orgs,
    orgCreated: () => {},
    queue,
    delivery: config.deliver ? (useThread ? 'thread' : 'in process') : 'off',
    async start() {
      started = true;
      await delivery.start(); // hands over what was committed before a stop or a crash
      readiness.ready('delivery');
    },
    idle: () => delivery.idle(),
    drain: async () => {
      await delivery.drain();
      passEmbeddedEvents(d.db);
    },
    close: async () => {},
  };
}

/** The data plane, seen from the engine's thread: on its own thread, or on this one. */
interface Delivery {
  registryChanged(change: RegistryChange): void;
  kick(): void;
  /** start delivering (what was left in the outbox first); resolves once the data plane has the registry */
  start(): Promise<void>;
  /** nothing held, in flight or being deleted by the data plane (the outbox itself is checked by the caller) */
  idle(): Promise<boolean>;
  /** SIGTERM (CONTRACT 6.6): take nothing more, finish the attempts in flight, leave the rest queued */
  drain(): Promise<void>;
}

function threadDelivery(d: TopologyDeps, limits: DeliveryLimits, registry: () => RegistryChange[]): Delivery {
  return new OutboxDeliveryThread({
    config: { db: d.config.db, limits, logLevel: d.logger.level },
    registry,
    outcomes: d.outcomes,
    logger: d.logger,
  });
}

/** On the engine's thread, over the engine's connection. */
function inProcessDelivery(d: TopologyDeps, limits: DeliveryLimits): Delivery {
  const plane = startOutboxDataPlane({ db: d.db, ledger: null, outcomes: d.outcomes, limits, logger: d.logger });
  return {
    registryChanged: (c) => void plane.apply(c),
    kick: () => plane.source.kick(),
    async start() {
      plane.source.kick();
    },
    idle: async () => plane.idle(),
    drain: () => plane.drain(),
  };
}
