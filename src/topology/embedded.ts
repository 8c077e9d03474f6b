// Embedded mode (`npm start`, no NATS): both planes in one process. The SQLite outbox is the durable
// queue; the data plane (outbox relay, pipeline, deliverer, outcome batches) runs on a thread of its
// own over its own SQLite connection (src/relay/local-delivery.ts), as NATS mode's delivery threads
// do, so that the engine's thread only commits. A database that cannot be opened twice (':memory:')
// or --delivery-threads 0 keeps it on the engine's thread.
//
// What the engine's thread still does here: the registry (RegistryRelay publishes each webhook
// change into it, and it forwards them to the data plane, secrets included: postMessage stays in
// the process), and the mirror of each committed event to plain subscribers of svc.events.> on the
// in-process bus (CONTRACT 5.2), once, when it is committed (a recovery item is never committed by
// the engine, so never mirrored: its subscribers saw the event already).
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import type { OutboxRow } from '../../store/outbox.ts';
import type { Bus } from '../bus/bus.ts';
import type { OutcomeBatch } from '../outcomes/outcome.ts';
import type { DeliveryLimits } from '../dataplane/data-plane.ts';
import { LocalDeliveryThread, type RegistryChange } from '../relay/local-delivery.ts';
import { startLocalDelivery } from '../relay/local-relay.ts';
import type { RegistryPublisher } from '../relay/registry.ts';

export interface EmbeddedTopology {
  /** where RegistryRelay publishes webhook changes */
  readonly registry: RegistryPublisher;
  /** 'thread' or 'in process' (for the `listening` line) */
  readonly delivery: string;
  /** after an engine commit that wrote outbox rows */
  outboxChanged(rows: readonly OutboxRow[]): void;
  /** rows were written to the outbox outside the engine's commits (a recovery's items, CONTRACT 4.5) */
  deliveryQueued(): void;
  /** start delivering (what was left in the outbox first); resolves once the data plane has the registry */
  start(): Promise<void>;
  /** nothing held, in flight or being deleted by the data plane (the outbox itself is checked by the caller) */
  idle(): Promise<boolean>;
  /** SIGTERM (CONTRACT 6.6): take nothing more, finish the attempts in flight, leave the rest queued */
  stop(): Promise<void>;
}

export function embeddedTopology(o: {
  db: Db;
  /** the database file, which the delivery thread opens too */
  dbFile: string;
  bus: Bus;
  limits: DeliveryLimits;
  /** false: deliver on the engine's thread (--delivery-threads 0) */
  thread: boolean;
  outcomes: (batch: OutcomeBatch) => void;
  logger: Logger;
}): EmbeddedTopology {
  // the newest version of every webhook (null entry: deleted), what a delivery thread loads first
  const webhooks = new Map<string, RegistryChange>();
  const useThread = o.thread && o.dbFile !== ':memory:';
  const delivery = useThread ? threadDelivery(o, () => [...webhooks.values()]) : inProcessDelivery(o);

  const registry: RegistryPublisher = {
    async publish(orgId, webhookId, v, entry) {
      const key = `${orgId}.${webhookId}`;
      const held = webhooks.get(key);
      if (held && held.v > v) return;
      const change: RegistryChange = { orgId, webhookId, v, entry };
      webhooks.set(key, change);
      delivery.registryChanged(change);
    },
    // nothing survives a restart in process: RegistryRelay publishes every webhook at start
    async replicated() {
      return new Map();
    },
  };

  return {
    registry,
    delivery: useThread ? 'thread' : 'in process',
    outboxChanged(rows) {
      for (const row of rows) {
        try {
          o.bus.publish(row.subject, row.body);
        } catch {
          // the bus is closing
        }
      }
      delivery.kick();
    },
    deliveryQueued: () => delivery.kick(),
    start: () => delivery.start(),
    idle: () => delivery.idle(),
    stop: () => delivery.drain(),
  };
}

interface Delivery {
  registryChanged(change: RegistryChange): void;
  kick(): void;
  start(): Promise<void>;
  idle(): Promise<boolean>;
  drain(): Promise<void>;
}

function threadDelivery(o: Parameters<typeof embeddedTopology>[0], registry: () => RegistryChange[]): Delivery {
  return new LocalDeliveryThread({ config: { db: o.dbFile, limits: o.limits, logLevel: o.logger.level }, registry, outcomes: o.outcomes, logger: o.logger });
}

/** On the engine's thread, over the engine's connection. */
function inProcessDelivery(o: Parameters<typeof embeddedTopology>[0]): Delivery {
  const d = startLocalDelivery({ db: o.db, ledger: null, outcomes: o.outcomes, limits: o.limits, logger: o.logger });
  return {
    registryChanged: (c) => void d.apply(c),
    kick: () => d.relay.kick(),
    async start() {
      d.relay.kick();
    },
    idle: async () => d.idle(),
    drain: () => d.drain(),
  };
}
