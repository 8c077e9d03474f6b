/**
 * The NATS bus: core NATS for jobs, ingest (request/reply, never captured by a stream) and control
 * messages. JetStream (the event stream, outcomes, the replicated registry) is used through the
 * connection this bus exposes; its layout is in jetstream.ts.
 */
import {
  connect,
  ClosedConnectionError,
  DrainingConnectionError,
  NoRespondersError,
  TimeoutError,
  type ConnectionOptions,
  type Msg,
  type NatsConnection,
} from '@nats-io/transport-node';
import {
  BusRequestError,
  DEFAULT_REQUEST_TIMEOUT_MS,
  consoleBusLogger,
  errorInfo,
  parseJson,
  runHandler,
  toBytes,
  type Bus,
  type BusLogger,
  type BusMessage,
  type BusRequestErrorCode,
} from '../bus.ts';
import { foregroundClock, sleep, systemClock, within } from '../../domain/clock.ts';
import { eventsPrefix } from '../subjects.ts';
import { natsConnectOptions, type NatsRole } from './nats-auth.ts';
import { natsUrlOptions, redactNatsUrl } from './nats-url.ts';

export { natsServers, natsUrlOptions, redactNatsUrl } from './nats-url.ts';

const DRAIN_TIMEOUT_MS = 10_000;

export interface NatsBusOptions {
  name?: string;
  logger?: BusLogger;
  /** whose credentials (a .creds file, CONTRACT 6.7) and which inbox prefix */
  role?: Exclude<NatsRole, 'producer'>;
  credsFile?: string | null;
  /** keep trying to connect until it works (a worker) instead of failing at once (svc serve) */
  waitForServer?: boolean;
}

export interface NatsBus extends Bus {
  readonly kind: 'nats';
  readonly nc: NatsConnection;
}

function requestErrorCode(err: unknown): BusRequestErrorCode {
  for (let e: unknown = err, i = 0; e && i < 5; e = (e as { cause?: unknown }).cause, i++) {
    if (e instanceof NoRespondersError || (e as Error).name === 'NoRespondersError') return 'no_responders';
    if (e instanceof TimeoutError || (e as Error).name === 'TimeoutError') return 'timeout';
    if (e instanceof ClosedConnectionError || e instanceof DrainingConnectionError) return 'closed';
  }
  return 'failed';
}

/**
 * A message as the bus hands it on: its subject, payload and reply subject only, not the client's
 * message (its parsed protocol fields and views): ingest keeps up to a group's worth of these
 * waiting, and what they hold is copied at every young-generation GC while they wait.
 */
class NatsBusMessage implements BusMessage {
  constructor(
    private readonly nc: NatsConnection,
    readonly subject: string,
    readonly data: Uint8Array,
    readonly reply: string | undefined,
  ) {}

  json<T = unknown>(): T {
    return parseJson<T>(this.data);
  }

  respond(data: Uint8Array | string): boolean {
    if (!this.reply || this.nc.isClosed()) return false;
    this.nc.publish(this.reply, toBytes(data));
    return true;
  }
}

/**
 * Bytes a connection gathers before it writes in the middle of a burst of publishes (nats.js's
 * `pendingLimit`, an option its types hide; 32 KiB by default). It writes what it holds at the end
 * of the turn anyway: a larger limit only means fewer, larger socket writes when a turn publishes
 * a lot (a group commit's answers, a relay round's copies for observers: hundreds of KiB). Ingest
 * alone, two runs of 14 alternating pairs: facts/s x1.06 and x1.04, svc CPU a fact -5 to -6 %
 * (BENCHMARKS.md, issue 33 step 14).
 */
export const PENDING_LIMIT = 256 * 1024;

/** Connect; an unreachable server is an error naming the URL (or, with waitForServer, a warning and another try). */
export async function connectNats(url: string, opts: NatsBusOptions = {}): Promise<NatsConnection> {
  const logger = opts.logger ?? consoleBusLogger;
  const options: ConnectionOptions = {
    ...natsConnectOptions({ servers: [], name: opts.name ?? 'svc', credsFile: opts.credsFile ?? null, role: opts.role ?? 'engine' }),
    ...natsUrlOptions(url),
    maxReconnectAttempts: -1, // reconnect forever once connected
    reconnectTimeWait: 1000,
    reconnectJitter: 250,
    timeout: 5000,
    pingInterval: 20_000,
    maxPingOut: 3,
    // no stack capture per request and per JetStream publish (a measurable share of the hot path)
    noAsyncTraces: true,
    ...({ pendingLimit: PENDING_LIMIT } as Partial<ConnectionOptions>),
  };
  for (let attempt = 1; ; attempt++) {
    try {
      return await connect(options);
    } catch (err) {
      const why = (err as Error)?.message ?? String(err);
      if (!opts.waitForServer) throw new Error(`cannot connect to NATS at ${redactNatsUrl(url)}: ${why}`, { cause: err });
      if (attempt === 1 || attempt % 30 === 0) logger.warn({ url: redactNatsUrl(url), err: why, attempt }, 'cannot reach NATS; retrying');
      // on the foreground clock: its timer holds the process open, nothing else does while it waits for NATS (svc worker)
      await sleep(foregroundClock, 1000);
    }
  }
}

export async function createNatsBus(url: string, opts: NatsBusOptions = {}): Promise<NatsBus> {
  const logger = opts.logger ?? consoleBusLogger;
  const nc = await connectNats(url, opts);

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

  let closing = false;

  function wrap(m: Msg): BusMessage {
    // Event copies seen by plain subscribers carry the JetStream publish's ack inbox: never answer it.
    const reply = m.reply && !m.subject.startsWith(eventsPrefix) ? m.reply : undefined;
    return new NatsBusMessage(nc, m.subject, m.data, reply);
  }

  const bus: NatsBus = {
    kind: 'nats',
    nc,

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
          runHandler(handler, wrap(m), logger);
        },
      });
      return {
        unsubscribe: () => {
          if (!sub.isClosed()) sub.unsubscribe();
        },
        drain: async () => {
          if (sub.isClosed() || nc.isClosed()) return;
          // the server has the UNSUB once this resolves, and every message it sent before has been
          // given to the callback; bounded, since it cannot finish while disconnected
          await within(systemClock, sub.drain(), DRAIN_TIMEOUT_MS);
          if (!sub.isClosed()) sub.unsubscribe();
        },
      };
    },

    async request(subject, data, o) {
      try {
        const m = await nc.request(subject, toBytes(data), { timeout: o?.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS });
        return wrap(m);
      } catch (err) {
        throw new BusRequestError(requestErrorCode(err), subject, undefined, { cause: err });
      }
    },

    async flush() {
      await nc.flush();
    },

    async close() {
      if (closing) return;
      closing = true;
      if (nc.isClosed()) return;
      // Drain flushes pending acks and publishes; bounded, since it cannot finish while disconnected.
      let failed = false;
      const drained = nc.drain().catch((err: unknown) => {
        failed = true;
        logger.warn({ ...errorInfo(err) }, 'nats drain failed');
      });
      const r = await within(systemClock, drained, DRAIN_TIMEOUT_MS);
      if (r === 'timeout' || failed) {
        if (r === 'timeout') logger.warn({ timeoutMs: DRAIN_TIMEOUT_MS }, 'nats drain timed out; closing');
        await nc.close().catch(() => undefined);
      }
    },
  };
  return bus;
}
