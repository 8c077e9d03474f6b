// NATS mode: events from the shared durable consumer `svc-dispatch` into one pipeline. It pulls
// only as many events as the pipeline has room for (the backlog stays in JetStream), drops and
// counts what the engine did not seal (CONTRACT 6.7), keeps held events alive with `working()`,
// acks an event once the pipeline settles it, and naks what the pipeline releases at a drain.
//
// Two guards against a nats-server defect (fixed upstream in April 2024, nats-io/nats-server#5305
// and #5338; Debian's 2.9.10 has it): when the server picks an event to redeliver (after a nak)
// while the only pull requests it has are dead ones (their client unsubscribed), it steps the
// consumer back by one and later hands out the last event it delivered once more, as a new
// delivery (delivery count 1), usually to the same data plane. So events released at a drain are
// nak'd with a delay that outlives this plane's own pull request (the dead one a drain leaves
// behind), and a second copy of an event this plane already holds is not attempted again: it is
// settled with the first.
import type { Logger } from 'pino';
import type { Consumer, JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { Clock, Timer } from '../domain/clock.ts';
import { decodeRoute } from '../domain/route.ts';
import { DISPATCH_CONSUMER, EVENT_ACK_WAIT_MS, EVENT_ID_HEADER, EVENTS_STREAM, ROUTE_HEADER, SEAL_HEADER } from '../bus/jetstream.ts';
import type { Seal } from '../bus/seal.ts';
import type { DeliveryPipeline, InboundEvent, ProgressStore } from './pipeline.ts';

export type DropReason = 'forged' | 'unparseable';

const MAX_PULL = 256;
/** How long a pull request waits on the server for events (a stopped plane's last one outlives it that long). */
const PULL_EXPIRES_MS = 2000;
/** Events released at a drain come back this much later, once this plane's last pull request has expired. */
export const RELEASE_DELAY_MS = PULL_EXPIRES_MS + 1000;

/** Which webhooks a redelivered event already had: NATS KV svc_progress, key = event id. */
export class KvProgress implements ProgressStore {
  constructor(private readonly kv: KV) {}

  async save(events: ReadonlyArray<{ event: InboundEvent; done: readonly string[] }>): Promise<void> {
    await Promise.all(events.map((e) => this.kv.put(progressKey(e.event.id), JSON.stringify(e.done))));
  }

  async load(eventId: string): Promise<string[]> {
    const e = await this.kv.get(progressKey(eventId));
    if (!e || e.operation !== 'PUT') return [];
    try {
      const v = e.json<unknown>();
      return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
    } catch {
      return [];
    }
  }
}

/** KV keys allow [-/_=.a-zA-Z0-9]: event ids are UUIDs. */
const progressKey = (eventId: string) => eventId.replace(/[^-/_=.a-zA-Z0-9]/g, '_');

export interface JetStreamSourceOptions {
  js: JetStreamClient;
  seal: Seal;
  pipeline: DeliveryPipeline;
  progress: KvProgress;
  clock: Clock;
  logger: Logger;
  dropped(reason: DropReason): void;
}

export class JetStreamSource {
  private consumer: Consumer | null = null;
  private stopped = false;
  private loop: Promise<void> | null = null;
  private current: { stop(): void } | null = null;
  /** ends the wait for room in the pipeline (stop() calls it: a full pipeline may never make room) */
  private wake: (() => void) | null = null;
  private readonly held = new Map<JsMsg, number>();
  /** copies of an event this plane holds (same event id), settled with it */
  private readonly copies = new Map<string, JsMsg[]>();
  private keepAlive: Timer | null = null;
  /** resolves start() once the first pull request is sent */
  private pulling: (() => void) | null = null;

  constructor(private readonly o: JetStreamSourceOptions) {}

  /**
   * Start pulling (waits for the engine to have created the stream and consumer); resolves once
   * the first pull request has been sent (a flush after it confirms that the server has it).
   */
  async start(): Promise<void> {
    for (let attempt = 1; !this.consumer; attempt++) {
      try {
        this.consumer = await this.o.js.consumers.get(EVENTS_STREAM, DISPATCH_CONSUMER);
      } catch (err) {
        if (attempt === 1) this.o.logger.warn({ err: String(err) }, `waiting for the ${EVENTS_STREAM} stream (svc serve creates it)`);
        if (this.stopped) return;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    // a held event is signalled at most 2/5 of the ack wait after it was taken or last signalled
    const every = Math.floor(EVENT_ACK_WAIT_MS / 5);
    this.keepAlive = this.o.clock.setInterval(() => this.signalWorking(every), every);
    if (this.stopped) return;
    const pulling = new Promise<void>((r) => (this.pulling = r));
    this.loop = this.run();
    await pulling;
  }

  private async run(): Promise<void> {
    const consumer = this.consumer!;
    let failing = false;
    while (!this.stopped) {
      const room = this.o.pipeline.room();
      if (room === 0) {
        await new Promise<void>((r) => {
          this.wake = r;
          this.o.pipeline.whenRoom(r);
        });
        this.wake = null;
        continue;
      }
      try {
        const batch = await consumer.fetch({ max_messages: Math.min(room, MAX_PULL), expires: PULL_EXPIRES_MS });
        this.current = batch;
        this.pulling?.();
        this.pulling = null;
        for await (const m of batch) {
          if (this.stopped) m.nak(RELEASE_DELAY_MS);
          else await this.take(m);
        }
        if (failing) this.o.logger.warn('pulling events again');
        failing = false;
      } catch (err) {
        if (this.stopped) break;
        if (!failing) this.o.logger.warn({ err: String(err) }, 'could not pull events; retrying');
        failing = true;
        await new Promise((r) => setTimeout(r, 1000));
      } finally {
        this.current = null;
      }
    }
  }

  private async take(m: JsMsg): Promise<void> {
    const h = m.headers;
    const id = h?.get(EVENT_ID_HEADER) ?? '';
    const routeText = h?.get(ROUTE_HEADER) ?? '';
    const seal = h?.get(SEAL_HEADER) ?? '';
    if (!id || !routeText || !seal || !this.o.seal.opensEvent(id, routeText, m.data, seal)) {
      this.o.dropped('forged');
      m.term('not sealed by the engine');
      return;
    }
    const route = decodeRoute(routeText);
    if (!route) {
      this.o.dropped('unparseable');
      m.term('unreadable route');
      return;
    }
    let done: string[] = [];
    if (m.redelivered) {
      try {
        done = await this.o.progress.load(id);
      } catch (err) {
        this.o.logger.warn({ event_id: id, err: String(err) }, 'could not read delivery progress; attempting every webhook');
      }
    }
    const copies = this.copies.get(id);
    if (copies) {
      // already held here: the same event handed out again (see the header), not a new one
      this.o.logger.warn({ event_id: id, stream_seq: m.seq, deliveries: m.info.deliveryCount }, 'JetStream handed out an event this data plane already holds; it is not attempted twice');
      copies.push(m);
      this.held.set(m, this.o.clock.now());
      return;
    }
    this.copies.set(id, []);
    this.held.set(m, this.o.clock.now());
    const forget = () => {
      for (const c of this.copies.get(id) ?? []) this.held.delete(c);
      this.copies.delete(id);
      this.held.delete(m);
    };
    const ev: InboundEvent = {
      id,
      route,
      body: Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength),
      done,
      settle: () => {
        for (const c of this.copies.get(id) ?? []) c.ack();
        forget();
        m.ack();
      },
      release: () => {
        forget();
        m.nak(RELEASE_DELAY_MS);
      },
    };
    this.o.pipeline.accept(ev);
  }

  /** Held events not yet done tell JetStream they are being worked on (not redelivered elsewhere). */
  private signalWorking(olderThanMs: number): void {
    const now = this.o.clock.now();
    for (const [m, since] of this.held) {
      if (now - since >= olderThanMs) {
        m.working();
        this.held.set(m, now);
      }
    }
  }

  /** Stop pulling (the pipeline's drain then settles or releases what it holds). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.current?.stop();
    this.wake?.();
    this.pulling?.();
    this.keepAlive?.cancel();
    await this.loop;
  }
}
