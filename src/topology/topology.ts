// The seam between svc serve and its two runtimes (ARCHITECTURE: "two runtimes behind one
// interface"): NATS mode (nats.ts) and embedded mode (embedded.ts) each give a bus, a place to
// replicate webhooks to, the org directory, the engine's event queue (event-queue.ts), a data plane, and their start, idle and
// stop. src/server.ts composes one of them with the engine, the API and the dashboard and never
// asks which; open.ts is the one place that picks.
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import type { ServeConfig } from '../config.ts';
import type { Bus } from '../bus/bus.ts';
import type { OutcomeBatch } from '../outcomes/outcome.ts';
import type { RelayFault } from '../handoff/outbox-relay.ts';
import type { RegistryPublisher } from '../handoff/registry-replicator.ts';
import type { Metrics } from '../metrics.ts';
import type { Readiness } from '../readiness.ts';
import type { EventQueue } from '../handoff/event-queue.ts';
import type { Engine } from '../engine/engine.ts';
import type { LateRefusal } from '../ingest/fact-stream.ts';

/** What producers' facts are applied with (CONTRACT 5.2, 9), whichever way they come. */
export interface IngestWiring {
  engine: Engine;
  /** facts per second per org (--ingest-rate-per-org); 0: no limit */
  ratePerOrg: number;
  /** whether an org's deliveries queue in a data plane (src/ingest/group-commits.ts HOLD_MS) */
  backlogged: (orgId: string) => boolean;
  /** record late refusals, inside the engine's transaction (NATS mode) */
  refused: (rows: LateRefusal[]) => void;
}

/** Producer ingest, running: `drain` stops taking requests, answers what was received, stops applying. */
export interface IngestRunning {
  drain(): Promise<void>;
}

export interface Topology {
  /** the bus producers, runners and observers use: NATS, or in process */
  readonly bus: Bus;
  /** where the RegistryReplicator publishes webhook changes: NATS KV, or the data plane's in-process registry */
  readonly registry: RegistryPublisher;
  /**
   * where the engine's transactions queue the events they emit and the items they enqueue, and what
   * hands them on after each commit: to the relays (NATS) or to the data plane (embedded)
   */
  readonly queue: EventQueue;
  /** how this process delivers, for the `listening on` line: 'N threads', 'thread', 'in process', 'off' */
  readonly delivery: string;
  /**
   * Start delivering, what was left in the outbox first (after the HTTP port is bound): the relay
   * or the outbox source, the outcome consumer, the delivery threads or the in-process data plane.
   * Resolves once each has confirmed it runs; reports the 'delivery' part of readiness then.
   */
  start(): Promise<void>;
  /**
   * Take producers' facts (once the engine runs): embedded mode, the bus's requests committed by
   * the engine and answered (src/ingest/ingest.ts); NATS mode, this process's ingest gate storing
   * them in SVC_FACTS (src/ingest/gate.ts) and the engine applying the stream (src/ingest/fact-stream.ts).
   */
  startIngest(w: IngestWiring): Promise<IngestRunning>;
  /** nothing held, in flight or queued beyond the outbox (the caller checks the outbox itself) */
  idle(): Promise<boolean>;
  /**
   * The first seq of the event history that is still queued (NATS mode: not yet stored by
   * JetStream); retention keeps it and what follows. Absent: no history row is a queue row.
   */
  historyQueuedFrom?(): number;
  /** SIGTERM, first (CONTRACT 6.6): the data plane takes nothing more, finishes its attempts in flight, leaves the rest queued */
  drain(): Promise<void>;
  /** SIGTERM, once HTTP is closed: publish what is committed if it can, stop taking outcomes (the bus is closed by the caller, last) */
  close(): Promise<void>;
}

/** What either topology is built from. */
export interface TopologyDeps {
  config: ServeConfig;
  db: Db;
  logger: Logger;
  metrics: Metrics;
  readiness: Readiness;
  /** the control plane's delivery status book, where outcome batches go */
  outcomes: (batch: OutcomeBatch) => void;
  /** a test's shortened replay window (src/bus/nats/jetstream.ts REPLAY_WINDOW_MS) for the data plane on this thread and the outcomes */
  replayWindowMs?: number;
  /** crash tests only (src/cli/serve.ts): where the outbox relay stops the process */
  relayFault?: RelayFault;
}
