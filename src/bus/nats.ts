/**
 * The NATS bus: core NATS for jobs and ingest (request/reply, never captured by a stream), and
 * JetStream for events: every event is published to the SVC_EVENTS stream (which captures
 * `svc.events.>` only, so plain subscribers see it too) with a Nats-Msg-Id, and dispatch consumes
 * it through one shared durable pull consumer, so several svc processes split the work.
 */
import {
  connect,
  nanos,
  ClosedConnectionError,
  DrainingConnectionError,
  NoRespondersError,
  TimeoutError,
  type Msg,
  type NatsConnection,
} from '@nats-io/transport-node';
import {
  jetstream,
  jetstreamManager,
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type ConsumerMessages,
  type JetStreamManager,
  type JsMsg,
  type StreamConfig,
} from '@nats-io/jetstream';
import {
  BusRequestError,
  DEFAULT_REQUEST_TIMEOUT_MS,
  EVENT_DEDUPE_WINDOW_MS,
  consoleBusLogger,
  errorInfo,
  parseJson,
  toBytes,
  type Bus,
  type BusLogger,
  type BusMessage,
  type BusRequestErrorCode,
  type Subscription,
} from './bus.ts';
import { eventsWildcard, ingestWildcard, subjectMatches, subjectsOverlap } from './subjects.ts';

export const EVENTS_STREAM = 'SVC_EVENTS';
export const DISPATCH_CONSUMER = 'svc-dispatch';

const STREAM_MAX_AGE_MS = 60 * 60 * 1000;
/** Redelivery of an event the consumer did not ack in time (the handler keeps it alive while it runs). */
const ACK_WAIT_MS = 30_000;
const WORKING_INTERVAL_MS = 10_000;
const MAX_DELIVER = 10;
const NAK_DELAY_MS = 1000;
/** Small pull batches so that several processes share the work evenly. */
const PULL_BATCH = 10;
const JS_TIMEOUT_MS = 10_000;
const DRAIN_TIMEOUT_MS = 10_000;

export interface NatsBusOptions {
  name?: string;
  logger?: BusLogger;
}

function streamConfig(): StreamConfig {
  return {
    name: EVENTS_STREAM,
    subjects: [eventsWildcard],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    max_age: nanos(STREAM_MAX_AGE_MS),
    duplicate_window: nanos(EVENT_DEDUPE_WINDOW_MS),
  } as StreamConfig;
}

function consumerConfig(): Partial<ConsumerConfig> {
  return {
    durable_name: DISPATCH_CONSUMER,
    description: 'svc event dispatch (shared by every svc process)',
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: nanos(ACK_WAIT_MS),
    max_deliver: MAX_DELIVER,
    filter_subject: eventsWildcard,
  };
}

function isApiError(err: unknown, code: number): boolean {
  return err instanceof JetStreamApiError && err.code === code;
}

async function ensureStream(jsm: JetStreamManager, logger: BusLogger): Promise<void> {
  const cfg = streamConfig();
  const update = async () => {
    const info = await jsm.streams.info(EVENTS_STREAM);
    const c = info.config;
    if (c.retention !== cfg.retention || c.storage !== cfg.storage) {
      logger.warn(
        { stream: EVENTS_STREAM, retention: c.retention, storage: c.storage },
        'existing event stream has a different retention or storage than svc expects; leaving them as they are',
      );
    }
    const same =
      JSON.stringify(c.subjects) === JSON.stringify(cfg.subjects) &&
      c.max_age === cfg.max_age &&
      c.duplicate_window === cfg.duplicate_window;
    if (!same) {
      await jsm.streams.update(EVENTS_STREAM, {
        subjects: cfg.subjects,
        max_age: cfg.max_age,
        duplicate_window: cfg.duplicate_window,
      });
    }
  };
  try {
    await update();
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.StreamNotFound)) throw err;
    try {
      await jsm.streams.add(cfg);
    } catch (addErr) {
      // another svc process created it meanwhile
      try {
        await update();
      } catch {
        throw addErr;
      }
    }
  }
}

async function ensureConsumer(jsm: JetStreamManager): Promise<void> {
  const cfg = consumerConfig();
  try {
    const info = await jsm.consumers.info(EVENTS_STREAM, DISPATCH_CONSUMER);
    const c = info.config;
    if (
      c.ack_wait !== cfg.ack_wait ||
      c.max_deliver !== cfg.max_deliver ||
      c.filter_subject !== cfg.filter_subject ||
      c.description !== cfg.description
    ) {
      await jsm.consumers.update(EVENTS_STREAM, DISPATCH_CONSUMER, {
        ack_wait: cfg.ack_wait,
        max_deliver: cfg.max_deliver,
        filter_subject: cfg.filter_subject,
        description: cfg.description,
      });
    }
  } catch (err) {
    if (!isApiError(err, JetStreamApiCodes.ConsumerNotFound)) throw err;
    // Adding a durable with an identical config is idempotent, so a concurrent start is fine.
    await jsm.consumers.add(EVENTS_STREAM, cfg);
  }
}

/** Refuses to run when a stream would capture ingest subjects: it would answer producers' requests itself. */
async function checkIngestNotCaptured(jsm: JetStreamManager): Promise<void> {
  for await (const si of jsm.streams.list()) {
    const subjects = si.config.subjects ?? [];
    const hit = subjects.find((s) => subjectsOverlap(s, ingestWildcard));
    if (hit) {
      throw new Error(
        `JetStream stream ${si.config.name} captures ${hit}, which overlaps ${ingestWildcard}: ` +
          'it would answer ingest requests itself (producers would think unrecorded facts were recorded). ' +
          'Remove that subject from the stream.',
      );
    }
  }
}

function requestErrorCode(err: unknown): BusRequestErrorCode {
  for (let e: unknown = err, i = 0; e && i < 5; e = (e as { cause?: unknown }).cause, i++) {
    if (e instanceof NoRespondersError || (e as Error).name === 'NoRespondersError') return 'no_responders';
    if (e instanceof TimeoutError || (e as Error).name === 'TimeoutError') return 'timeout';
    if (e instanceof ClosedConnectionError || e instanceof DrainingConnectionError) return 'closed';
  }
  return 'failed';
}

export async function createNatsBus(url: string, opts: NatsBusOptions = {}): Promise<Bus> {
  const logger = opts.logger ?? consoleBusLogger;
  const servers = url
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const nc: NatsConnection = await connect({
    servers,
    name: opts.name ?? 'svc',
    maxReconnectAttempts: -1, // reconnect forever
    reconnectTimeWait: 1000,
    reconnectJitter: 250,
    timeout: 5000,
    pingInterval: 20_000,
    maxPingOut: 3,
  });

  // Connection status is informational: the client keeps reconnecting on its own.
  void (async () => {
    for await (const s of nc.status()) {
      switch (s.type) {
        case 'disconnect':
          logger.warn({ server: s.server }, 'nats disconnected');
          break;
        case 'reconnect':
          logger.warn({ server: s.server }, 'nats reconnected');
          break;
        case 'error':
          logger.warn({ ...errorInfo(s.error) }, 'nats error');
          break;
        case 'slowConsumer':
          logger.warn({ subject: s.sub.getSubject(), pending: s.pending }, 'nats slow consumer');
          break;
        default:
          break;
      }
    }
  })().catch(() => undefined);

  let jsm: JetStreamManager;
  try {
    jsm = await jetstreamManager(nc, { timeout: JS_TIMEOUT_MS });
    await checkIngestNotCaptured(jsm);
    await ensureStream(jsm, logger);
    await ensureConsumer(jsm);
  } catch (err) {
    await nc.close().catch(() => undefined);
    const hint = /jetstream not enabled|JetStreamNotEnabled/i.test(String((err as Error)?.message ?? err))
      ? ' (start nats-server with JetStream enabled: -js)'
      : '';
    throw new Error(`NATS bus setup failed at ${url}: ${(err as Error)?.message ?? String(err)}${hint}`, { cause: err });
  }
  const js = jetstream(nc, { timeout: JS_TIMEOUT_MS });

  let closing = false;
  const stoppers = new Set<() => Promise<void>>();

  function wrap(m: Msg): BusMessage {
    // Event copies seen by plain subscribers carry the JetStream publish's ack inbox: never answer it.
    const reply = m.reply && !subjectMatches(eventsWildcard, m.subject) ? m.reply : undefined;
    return {
      subject: m.subject,
      data: m.data,
      reply,
      json<T = unknown>(): T {
        return parseJson<T>(m.data);
      },
      respond(data: Uint8Array | string): boolean {
        if (!reply || nc.isClosed()) return false;
        nc.publish(reply, toBytes(data));
        return true;
      },
    };
  }

  let recovering: Promise<void> | null = null;
  function recoverConsumer(): void {
    if (recovering || closing) return;
    recovering = (async () => {
      try {
        await ensureStream(jsm, logger);
        await ensureConsumer(jsm);
        logger.warn({ stream: EVENTS_STREAM, consumer: DISPATCH_CONSUMER }, 'recreated the event stream/consumer');
      } catch (err) {
        logger.warn({ ...errorInfo(err) }, 'could not recreate the event stream/consumer');
      } finally {
        setTimeout(() => (recovering = null), 5000).unref();
      }
    })();
  }

  async function handleEvent(m: JsMsg, handler: (subject: string, data: Uint8Array) => Promise<void>): Promise<void> {
    const keepAlive = setInterval(() => m.working(), WORKING_INTERVAL_MS);
    try {
      await handler(m.subject, m.data);
      m.ack();
    } catch (err) {
      logger.warn({ subject: m.subject, redelivery: m.info.deliveryCount, ...errorInfo(err) }, 'event handler failed; will be redelivered');
      m.nak(NAK_DELAY_MS);
    } finally {
      clearInterval(keepAlive);
    }
  }

  const bus: Bus = {
    kind: 'nats',

    publish(subject, data) {
      nc.publish(subject, toBytes(data));
    },

    subscribe(subject, handler, o) {
      const sub = nc.subscribe(subject, {
        queue: o?.queue,
        callback: (err, m) => {
          if (err) {
            logger.warn({ subject, ...errorInfo(err) }, 'nats subscription error');
            return;
          }
          try {
            const r = handler(wrap(m));
            if (r && typeof (r as Promise<void>).then === 'function') {
              (r as Promise<void>).catch((e: unknown) => logger.warn({ subject: m.subject, ...errorInfo(e) }, 'bus handler failed'));
            }
          } catch (e) {
            logger.warn({ subject: m.subject, ...errorInfo(e) }, 'bus handler failed');
          }
        },
      });
      return {
        unsubscribe: () => {
          if (!sub.isClosed()) sub.unsubscribe();
        },
      };
    },

    async request(subject, data, o) {
      try {
        const m = await nc.request(subject, toBytes(data), { timeout: o?.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS });
        return wrap(m);
      } catch (err) {
        const code = requestErrorCode(err);
        throw new BusRequestError(code, subject, undefined, { cause: err });
      }
    },

    async publishEvent(subject, data, msgId) {
      if (!subjectMatches(eventsWildcard, subject)) throw new Error(`not an event subject: ${JSON.stringify(subject)}`);
      await js.publish(subject, toBytes(data), { msgID: msgId });
    },

    async consumeEvents(handler) {
      if (closing) throw new Error('bus closed');
      const consumer = await js.consumers.get(EVENTS_STREAM, DISPATCH_CONSUMER);
      const messages: ConsumerMessages = await consumer.consume({ max_messages: PULL_BATCH });
      let stopped = false;

      void (async () => {
        for await (const s of messages.status()) {
          if (s.type === 'consumer_deleted' || s.type === 'consumer_not_found' || s.type === 'stream_not_found') {
            logger.warn({ status: s.type }, 'event consumer missing');
            recoverConsumer();
          } else if (s.type === 'heartbeats_missed') {
            logger.warn({ count: s.count }, 'event consumer missed heartbeats');
          }
        }
      })().catch(() => undefined);

      const loop = (async () => {
        try {
          for await (const m of messages) {
            if (stopped) {
              m.nak(); // hand it to another process at once
              continue;
            }
            await handleEvent(m, handler);
          }
        } catch (err) {
          if (!stopped) logger.warn({ ...errorInfo(err) }, 'event consumer stopped');
        }
      })();

      let stopping: Promise<void> | null = null;
      const stop = (): Promise<void> => {
        if (!stopping) {
          stopped = true;
          stopping = (async () => {
            await messages.close().catch(() => undefined);
            await loop;
          })().finally(() => stoppers.delete(stop));
        }
        return stopping;
      };
      stoppers.add(stop);
      return { unsubscribe: () => void stop() };
    },

    async flush() {
      await nc.flush();
    },

    async close() {
      if (closing) return;
      closing = true;
      await Promise.allSettled([...stoppers].map((s) => s()));
      if (!nc.isClosed()) {
        // Drain flushes pending acks and publishes; bounded, since it cannot finish while disconnected.
        let timer: NodeJS.Timeout | undefined;
        const timedOut = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), DRAIN_TIMEOUT_MS)));
        const r = await Promise.race([nc.drain().then(() => 'ok' as const), timedOut]).catch((err: unknown) => {
          logger.warn({ ...errorInfo(err) }, 'nats drain failed');
          return 'failed' as const;
        });
        clearTimeout(timer);
        if (r !== 'ok') {
          if (r === 'timeout') logger.warn({ timeoutMs: DRAIN_TIMEOUT_MS }, 'nats drain timed out; closing');
          await nc.close().catch(() => undefined);
        }
      }
    },
  };
  return bus;
}
