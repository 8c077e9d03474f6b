// Prometheus metrics (CONTRACT 6.5). Each call builds its own Registry so that tests and
// several service instances in one process never share counters.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Label values of svc_ingest_messages_total{result} and svc_deliveries_total{outcome}. */
export type IngestResultLabel = 'accepted' | 'duplicate' | 'ignored' | 'invalid' | 'unclassified';
export type DeliveryOutcomeLabel = 'success' | 'failure';

export interface Metrics {
  registry: Registry;
  /** svc_ingest_messages_total{result} */
  ingestMessages: Counter<'result'>;
  /** svc_events_emitted_total{type} */
  eventsEmitted: Counter<'type'>;
  /** svc_deliveries_total{outcome} */
  deliveries: Counter<'outcome'>;
  /** svc_delivery_duration_seconds (every delivery attempt) */
  deliveryDuration: Histogram<string>;
  /** svc_deliveries_in_flight (attempts under way over the data planes; set by the collector) */
  deliveriesInFlight: Gauge<string>;
  /** svc_events_dropped_total{reason}: events taken off the bus and not delivered */
  eventsDropped: Counter<'reason'>;
  /** svc_recovery_attempts_total{outcome}: attempts made by recoveries (CONTRACT 4.5) */
  recoveryAttempts: Counter<'outcome'>;
  /** svc_rate_limited_total{what}: requests refused by a per-org share (CONTRACT 8): `api` (429), `ingest` (rate_limited) */
  rateLimited: Counter<'what'>;
  /** svc_events_pruned_total{reason}: kept events deleted before their retention (`quota`: --max-events-per-org) */
  eventsPruned: Counter<'reason'>;
  /** svc_hop_batch_events: events per message the relay publishes on the durable hop (NATS mode) */
  hopBatchEvents: Histogram<string>;
  /** where svc_deliveries_in_flight reads its value at each scrape */
  setInFlightSource(fn: () => number): void;
  /** svc_facts_pending (CONTRACT 9): facts SVC_FACTS acknowledged that the engine has not applied yet (NATS mode) */
  factsPending: Gauge<string>;
  /** where svc_facts_pending reads its value at each scrape */
  setFactsPendingSource(fn: () => number): void;
}

/** Buckets from 1 ms to 10 s (the delivery timeout is 5 s by default). */
export const DELIVERY_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A counter with one label, its known values shown at 0 from the start (Prometheus sees every series). */
function labelledCounter<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  label: L,
  values: readonly string[] = [],
): Counter<L> {
  const counter = new Counter({ name, help, labelNames: [label] as const, registers: [registry] });
  for (const v of values) counter.inc({ [label]: v } as Partial<Record<L, string>>, 0);
  return counter;
}

const INGEST_RESULTS = ['accepted', 'duplicate', 'ignored', 'invalid', 'unclassified'] as const satisfies readonly IngestResultLabel[];
const DELIVERY_OUTCOMES = ['success', 'failure'] as const satisfies readonly DeliveryOutcomeLabel[];
/** Label values of svc_rate_limited_total{what}. */
export type RateLimitedLabel = 'api' | 'ingest';
const RATE_LIMITED = ['api', 'ingest'] as const satisfies readonly RateLimitedLabel[];

export function createMetrics(opts: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  const ingestMessages = labelledCounter(
    registry,
    'svc_ingest_messages_total',
    'Producer messages received on svc.ingest.>, by result',
    'result',
    INGEST_RESULTS,
  );
  const eventsEmitted = labelledCounter(
    registry,
    'svc_events_emitted_total',
    'CloudEvents emitted by the engine, by CloudEvents type',
    'type',
  );
  const deliveries = labelledCounter(
    registry,
    'svc_deliveries_total',
    'Webhook delivery attempts, by outcome (no retries: one attempt per event and webhook)',
    'outcome',
    DELIVERY_OUTCOMES,
  );

  const deliveryDuration = new Histogram({
    name: 'svc_delivery_duration_seconds',
    help: 'Duration of webhook delivery attempts in seconds (target check, request and response)',
    buckets: DELIVERY_DURATION_BUCKETS,
    registers: [registry],
  });

  const deliveriesInFlight = new Gauge({
    name: 'svc_deliveries_in_flight',
    help: 'Webhook delivery attempts under way, over the data planes that reported in the last 10 s',
    registers: [registry],
    collect() {
      this.set(inFlight());
    },
  });
  let inFlight: () => number = () => 0;

  const factsPending = new Gauge({
    name: 'svc_facts_pending',
    help: 'Producer facts the SVC_FACTS stream acknowledged that the engine has not applied yet (NATS mode; 0 in embedded mode)',
    registers: [registry],
    collect() {
      this.set(pendingFacts());
    },
  });
  let pendingFacts: () => number = () => 0;

  const eventsDropped = labelledCounter(
    registry,
    'svc_events_dropped_total',
    'Events taken off the bus and not delivered, by reason (forged: not sealed by the engine; unparseable; unpublishable: set ' +
      'aside, the bus cannot carry it)',
    'reason',
    ['forged', 'unparseable', 'unpublishable'],
  );
  const recoveryAttempts = labelledCounter(
    registry,
    'svc_recovery_attempts_total',
    'Webhook delivery attempts made by recoveries (POST …/recover), by outcome',
    'outcome',
    DELIVERY_OUTCOMES,
  );

  const rateLimited = labelledCounter(
    registry,
    'svc_rate_limited_total',
    "Requests refused by an org's share (CONTRACT 8), by what: api (429 past --api-queue-per-org), ingest (facts over " +
      '--ingest-rate-per-org)',
    'what',
    RATE_LIMITED,
  );
  const eventsPruned = labelledCounter(
    registry,
    'svc_events_pruned_total',
    "Kept events deleted before their retention, by reason (quota: the org's oldest past --max-events-per-org)",
    'reason',
    ['quota'],
  );

  const hopBatchEvents = new Histogram({
    name: 'svc_hop_batch_events',
    help: 'Events per JetStream message the outbox relay publishes (NATS mode: the durable hop pays its costs per message)',
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
    registers: [registry],
  });

  if (opts.defaultMetrics) collectDefaultMetrics({ register: registry });

  return {
    registry,
    ingestMessages,
    eventsEmitted,
    deliveries,
    deliveryDuration,
    deliveriesInFlight,
    eventsDropped,
    recoveryAttempts,
    rateLimited,
    eventsPruned,
    hopBatchEvents,
    setInFlightSource: (fn: () => number) => {
      inFlight = fn;
    },
    factsPending,
    setFactsPendingSource: (fn: () => number) => {
      pendingFacts = fn;
    },
  };
}

/** Prometheus text exposition of a Metrics registry. */
export async function renderMetrics(m: Metrics): Promise<{ contentType: string; body: string }> {
  return { contentType: m.registry.contentType, body: await m.registry.metrics() };
}
