// NATS mode: events from the shared durable consumer `svc-dispatch` into one pipeline. Each
// message is a batch of events (src/bus/hop.ts) and the unit of everything JetStream does: it is
// sealed, acked, nak'd, kept alive and recorded (progress) as a whole, so those costs are paid once
// per batch. It pulls only as many batches as the pipeline has room for (the backlog stays in
// JetStream), drops and counts what the engine did not seal (CONTRACT 6.7), keeps held batches
// alive with `working()`, acks a batch once the pipeline has settled every event of it, and naks a
// batch an event of which the pipeline released at a drain (its record says which events were
// settled and which webhooks the others had, so the next holder repeats nothing else).
//
// Beside this module, each with one job: ./progress.ts (the sealed progress records, KV
// svc_progress), ./reconnect.ts (what this plane keeps across a lost connection: a nats-server
// restart), ./park-return.ts (parked batches given back for another plane) and ./server-defects.ts
// (guards against nats-server defects, each named after its upstream issue).
//
// Fair intake (CONTRACT 8). A batch holds the events of one org (src/handoff/outbox-relay.ts
// publishes one message per org). One handed out while its org has no room left in the pipeline
// (roomFor: its share of the window) is nak'd with a delay (OVER_SHARE_DELAY_MS): that org's
// backlog waits in JetStream, the pull goes on, and the next batch (another org's) is taken at
// once. A batch of several orgs (published before this split) is taken while any of them has room.
//
// Replays (CONTRACT 6.7). The relay seals each batch with the time it publishes it; JetStream
// stamps each message with the time it stored it (in the ack subject each delivery carries, so
// reading it costs nothing). A batch stored more than REPLAY_WINDOW_MS after it was sealed was
// published again by someone else, later: dropped and counted `replayed`. A backlog however old
// is delivered (it was stored right after it was sealed), and so are rows a relay publishes late
// after an outage (it seals each publish afresh; the NATS client drops what it buffered while
// disconnected, so nothing sealed before an outage is stored after it). Within the window a copy
// is a JetStream duplicate (same Nats-Msg-Id, 10 min window; a copy without one does not open:
// the batch id is in the seal), and this plane remembers what it settled for longer than the
// window (./reconnect.ts: after a nats-server restart, whose duplicate tracking forgets acked
// messages). The embedded mode has nothing to replay: its data plane reads the outbox in process.
import type { Logger } from 'pino';
import type { Consumer, JetStreamClient, JsMsg } from '@nats-io/jetstream';
import { sleep, type Clock, type Timer } from '../../../domain/clock.ts';
import { decodeRoute } from '../../../domain/event-route.ts';
import {
  DISPATCH_CONSUMER,
  EVENT_ACK_WAIT_MS,
  EVENT_ID_HEADER,
  EVENTS_STREAM,
  REPLAY_WINDOW_MS,
  SEAL_HEADER,
  storedAtMs,
} from '../../../bus/nats/jetstream.ts';
import { decodeHopBatch } from '../../../bus/hop.ts';
import type { Seal } from '../../../bus/seal.ts';
import type { DeliveryPipeline, InboundEvent } from '../../pipeline.ts';
import { RepeatedWarnings } from '../../../log-summary.ts';
import type { HopEvent } from '../../../bus/hop.ts';
import type { EventRoute } from '../../../domain/event-route.ts';
import type { HeldBatch, KvProgress, ProgressRecord } from './progress.ts';
import { ReconnectMemory } from './reconnect.ts';
import { PARK_RETURN_TICK_MS, returnParked } from './park-return.ts';
import { endPullWithout408, keepCopy5305, releaseDelayMs5305 } from './server-defects.ts';

export type DropReason = 'forged' | 'unparseable' | 'replayed';

/** Events asked for in one pull at most (in whole batches, at least one). */
const MAX_PULL = 256;
/** Events in a batch at most (src/handoff/outbox-relay.ts): what a pull assumes before it has seen any. */
const LARGEST_BATCH = 256;
/** How long a pull request waits on the server for events (a stopped plane's last one outlives it that long). */
const PULL_EXPIRES_MS = 2000;
/** Batches released at a drain come back this much later, once this plane's last pull request has expired (nats-server#5305). */
export const RELEASE_DELAY_MS = releaseDelayMs5305(PULL_EXPIRES_MS);
/**
 * A batch of an org over its share comes back this much later (its events wait in JetStream
 * meanwhile), times the times it was handed out, up to OVER_SHARE_MAX_DELAY_MS: an org's long
 * backlog is handed out again every 10 s, not every second.
 */
export const OVER_SHARE_DELAY_MS = 1000;
const OVER_SHARE_MAX_DELAY_MS = 10_000;
/** After a pull whose batches were all deferred, the next pull waits for an event to settle, or this long, */
const DEFERRED_PAUSE_MS = 50;
/** ... and asks for this many batches at least (what is due again of an over-share org is gone through quickly). */
const DEFERRED_PULL = 64;

export interface JetStreamSourceOptions {
  js: JetStreamClient;
  /** this data plane (named as the holder in progress records) */
  workerId: string;
  seal: Seal;
  pipeline: DeliveryPipeline;
  progress: KvProgress;
  clock: Clock;
  logger: Logger;
  /** counted per event */
  dropped(reason: DropReason, events?: number): void;
  /** REPLAY_WINDOW_MS unless a test shortens it */
  replayWindowMs?: number;
}

export class JetStreamSource {
  private consumer: Consumer | null = null;
  private stopped = false;
  private loop: Promise<void> | null = null;
  private current: { stop(): void } | null = null;
  /** ends the wait for room in the pipeline (stop() calls it: a full pipeline may never make room) */
  private wake: (() => void) | null = null;
  /** messages held (a batch, or a copy of one) and when last signalled */
  private readonly held = new Map<JsMsg, number>();
  /** batches this plane holds, by id, and copies of them handed out again (settled with them) */
  private readonly batches = new Map<string, { batch: HeldBatch; copies: JsMsg[] }>();
  private keepAlive: Timer | null = null;
  private parkReturns: Timer | null = null;
  /** resolves start() once the first pull request is sent */
  private pulling: (() => void) | null = null;
  /** what this plane settled lately and holds, kept across a lost connection */
  private readonly memory: ReconnectMemory;
  private readonly replayWindowMs: number;
  private readonly replays: RepeatedWarnings;
  private readonly progressFailures: RepeatedWarnings;
  /**
   * Events in the largest of the last batches taken: a pull asks for as many batches as hold the
   * events it wants, at that size, so a plane never takes much more than its share of a backlog
   * (another plane may be waiting for it) nor more than the pipeline has room for.
   */
  private readonly recentSizes: number[] = [LARGEST_BATCH];
  /** records being written for batches released at a drain (nak'd once written) */
  private readonly releasing = new Set<Promise<void>>();
  /** held batches with events settled since their record was last written */
  private readonly dirty = new Set<HeldBatch>();
  /** batches (and their copies) settled in this turn of the event loop: acked at its end */
  private acks: JsMsg[] = [];
  /** the end-of-turn write of records and acks is scheduled */
  private endOfTurn = false;
  /** pull requests the server let expire without ending them (ended here instead) */
  overdue = 0;
  /** batches nak'd because their org had its share of the window (CONTRACT 8) */
  deferred = 0;
  /** batches given back after PARK_RETURN_MS parked whole */
  returned = 0;
  /** a whenRoom listener of a pause after deferred batches is registered */
  private listening = false;
  /** the last pull's batches were all deferred */
  private skipping = false;

  constructor(private readonly o: JetStreamSourceOptions) {
    this.replays = new RepeatedWarnings(
      o.logger,
      o.clock,
      'a batch of events stored long after the engine sealed it was dropped: published again by someone (a replay), or the ' +
        'clocks of the engine and the nats-server differ by more than the replay window',
    );
    this.progressFailures = new RepeatedWarnings(
      o.logger,
      o.clock,
      'could not record the events of a batch settled so far; if this plane dies they are attempted again',
    );
    this.replayWindowMs = o.replayWindowMs ?? REPLAY_WINDOW_MS;
    this.memory = new ReconnectMemory({
      workerId: o.workerId,
      progress: o.progress,
      pipeline: o.pipeline,
      clock: o.clock,
      logger: o.logger,
      replayWindowMs: this.replayWindowMs,
      stopped: () => this.stopped,
    });
  }

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
        await sleep(this.o.clock, 500);
      }
    }
    // a held batch is signalled at most 2/5 of the ack wait after it was taken or last signalled
    const every = Math.floor(EVENT_ACK_WAIT_MS / 5);
    this.keepAlive = this.o.clock.setInterval(() => {
      this.signalWorking(every);
      this.memory.forget();
    }, every);
    this.parkReturns = this.o.clock.setInterval(() => this.returnParked(), PARK_RETURN_TICK_MS);
    if (this.stopped) return;
    const pulling = new Promise<void>((r) => (this.pulling = r));
    this.loop = this.run();
    await pulling;
  }

  private async run(): Promise<void> {
    const consumer = this.consumer!;
    let failing = false;
    while (!this.stopped) {
      const paused = this.memory.paused;
      if (paused) {
        await paused;
        continue;
      }
      const room = this.o.pipeline.room();
      if (room === 0) {
        await new Promise<void>((r) => {
          this.wake = r;
          this.o.pipeline.whenRoom(r);
        });
        this.wake = null;
        continue;
      }
      let deadline: Timer | null = null;
      try {
        const epoch = this.memory.epoch;
        const batchSize = Math.max(...this.recentSizes);
        // after a pull that was all deferred, a larger one: what is behind them (another org's) comes sooner
        const wanted = Math.max(1, Math.floor(Math.min(room, MAX_PULL) / batchSize), this.skipping ? DEFERRED_PULL : 0);
        const batch = await consumer.fetch({ max_messages: wanted, expires: PULL_EXPIRES_MS });
        this.current = batch;
        // nats-server 2.9 may let an expired pull request go without its 408 (server-defects.ts)
        deadline = endPullWithout408(this.o.clock, batch, PULL_EXPIRES_MS, () => this.overdue++);
        this.pulling?.();
        this.pulling = null;
        const deferredBefore = this.deferred;
        let handedOut = 0;
        for await (const m of batch) {
          handedOut++;
          if (this.stopped) m.nak(RELEASE_DELAY_MS);
          else if (this.memory.epoch === epoch) await this.take(m, epoch);
          // else handed out before the connection was lost: not taken (neither acked nor nak'd), it
          // comes back from the server, which may have forgotten it or handed it out again meanwhile
        }
        if (failing) this.o.logger.warn('pulling events again');
        failing = false;
        this.skipping = handedOut > 0 && this.deferred - deferredBefore === handedOut;
        if (this.skipping && !this.stopped) await this.pauseAfterDeferred();
      } catch (err) {
        if (this.stopped) break;
        if (!failing) this.o.logger.warn({ err: String(err) }, 'could not pull events; retrying');
        failing = true;
        await sleep(this.o.clock, 1000);
      } finally {
        deadline?.cancel();
        this.current = null;
      }
    }
  }

  /**
   * Every batch of the last pull was deferred (their orgs are at their share): pull again once an
   * event settles, or shortly (another org's batch may be next), not at once.
   */
  private pauseAfterDeferred(): Promise<void> {
    return new Promise<void>((r) => {
      const timer = this.o.clock.setTimeout(() => this.wake?.(), DEFERRED_PAUSE_MS);
      this.wake = () => {
        this.wake = null;
        timer.cancel();
        r();
      };
      // one listener at a time, however many pauses end by their timer first
      if (this.listening) return;
      this.listening = true;
      this.o.pipeline.whenRoom(() => {
        this.listening = false;
        this.wake?.();
      });
    });
  }

  private async take(m: JsMsg, epoch: number): Promise<void> {
    const h = m.headers;
    const id = h?.get(EVENT_ID_HEADER) ?? '';
    const seal = h?.get(SEAL_HEADER) ?? '';
    const sealedAt = id && seal ? this.o.seal.openHop(id, m.data, seal) : null;
    if (sealedAt === null) {
      this.o.dropped('forged');
      // term() without a reason: nats-server 2.9 ignores a `+TERM <reason>` ack, and the message
      // would come back after every ack wait (and be counted again)
      m.term();
      return;
    }
    const events = decodeHopBatch(m.data);
    if (!events) {
      this.o.dropped('unparseable');
      m.term();
      return;
    }
    const late = storedAtMs(m) - sealedAt;
    if (late > this.replayWindowMs) {
      this.o.dropped('replayed', events.length);
      this.replays.warn(
        { subject: m.subject },
        { batch_id: id, events: events.length, stored_after_ms: Math.round(late), window_ms: this.replayWindowMs },
      );
      m.term();
      return;
    }
    if (this.holdsOrSettled(id, m)) return;
    const routes = events.map((e) => decodeRoute(e.route));
    if (!routes.some((r) => r && this.o.pipeline.roomFor(r.org) > 0) && routes.some((r) => r)) {
      // its org has its share of the window already: the batch waits in JetStream, not here
      this.deferred++;
      m.nak(Math.min(OVER_SHARE_DELAY_MS * Math.max(1, m.info.deliveryCount), OVER_SHARE_MAX_DELAY_MS));
      return;
    }
    let rec: ProgressRecord | null = null;
    if (m.redelivered || this.memory.suspect) {
      const found = await this.memory.lookUp(id, m, epoch);
      if (found === undefined) return; // settled or held elsewhere, or the connection was lost meanwhile
      rec = found;
      if (this.holdsOrSettled(id, m)) return;
    }
    this.recentSizes.push(events.length);
    if (this.recentSizes.length > 16) this.recentSizes.shift();
    this.hold(id, m, events, routes, rec);
  }

  /** A batch taken: held here, its events (minus those its record says were settled) to the pipeline. */
  private hold(
    id: string,
    m: JsMsg,
    events: readonly HopEvent[],
    routes: ReadonlyArray<EventRoute | null>,
    rec: ProgressRecord | null,
  ): void {
    const ids: string[] = [];
    const b: HeldBatch = { id, m, done: new Map(), finished: new Set(rec?.finished ?? []), ids, left: 0, released: false };
    const inbound: InboundEvent[] = [];
    let unparseable = 0;
    for (const [i, e] of events.entries()) {
      if (b.finished.has(e.id)) continue;
      const route = routes[i];
      if (!route) {
        unparseable++;
        b.finished.add(e.id);
        continue;
      }
      const done = rec?.done[e.id] ?? [];
      if (done.length) b.done.set(e.id, done);
      ids.push(e.id);
      inbound.push({
        id: e.id,
        route,
        body: e.body,
        done,
        settle: () => {
          b.finished.add(e.id);
          b.done.delete(e.id);
          if (--b.left === 0) this.finish(b);
          else this.recordSettled(b);
        },
        release: () => {
          b.released = true;
          if (--b.left === 0) this.finish(b);
        },
      });
    }
    if (unparseable) this.o.dropped('unparseable', unparseable);
    b.left = inbound.length;
    this.batches.set(id, { batch: b, copies: [] });
    this.held.set(m, this.o.clock.now());
    this.o.progress.track(b);
    if (b.left === 0) {
      this.finish(b);
      return;
    }
    // counted in full first: the pipeline may settle an event (no webhook wants it) as it takes it
    for (const ev of inbound) this.o.pipeline.accept(ev);
  }

  /**
   * An event of a batch still held settled: its record says so at the end of this turn of the event
   * loop (one write per batch for all its events settled in the turn: responses that arrive
   * together are one turn), as the ack of an event alone would: if this plane dies, the batch's next
   * holder repeats only the attempts that were in flight (CONTRACT 6.6), not the events settled.
   */
  private recordSettled(b: HeldBatch): void {
    this.dirty.add(b);
    this.atEndOfTurn();
  }

  /**
   * Records and acks made in one turn of the event loop go out together at its end, in one socket
   * write (the NATS client writes what was published by the time its microtask runs; responses
   * that arrive together are separate callbacks, each with its own microtasks).
   */
  private atEndOfTurn(): void {
    if (this.endOfTurn) return;
    this.endOfTurn = true;
    setImmediate(() => this.writeTurn());
  }

  private writeTurn(): void {
    this.endOfTurn = false;
    for (const d of this.dirty) {
      if (!this.batches.has(d.id)) continue; // acked or released meanwhile
      this.o.progress
        .send(d)
        .catch((err: unknown) => this.progressFailures.warn({ reason: 'settled events' }, { batch_id: d.id, err: String(err) }));
    }
    this.dirty.clear();
    const acks = this.acks;
    this.acks = [];
    for (const m of acks) m.ack();
  }

  /** Every event of a held batch settled (ack), or some released at a drain (record, then nak). */
  private finish(b: HeldBatch): void {
    const copies = this.letGo(b);
    if (!b.released) {
      this.o.progress.untrack(b);
      // copies of it (nats-server#5305, server-defects.ts) are settled with it
      for (const c of copies) this.acks.push(c);
      this.acks.push(b.m);
      this.atEndOfTurn();
      this.memory.settledHere(b.id);
      return;
    }
    // what its events had goes with it (the pipeline saved the unfinished ones' progress before releasing them)
    const writing = (b.finished.size || b.done.size ? this.o.progress.write(b).then(() => undefined) : Promise.resolve())
      .catch((err: unknown) =>
        this.o.logger.warn(
          { batch_id: b.id, err: String(err) },
          'could not record the progress of a released batch; its settled events will be attempted again',
        ),
      )
      .finally(() => {
        this.o.progress.untrack(b);
        b.m.nak(RELEASE_DELAY_MS);
        this.releasing.delete(writing);
      });
    this.releasing.add(writing);
  }

  /** The batch (and its copies) no longer held here; its copies. */
  private letGo(b: HeldBatch): JsMsg[] {
    this.dirty.delete(b);
    const copies = this.batches.get(b.id)?.copies ?? [];
    for (const c of copies) this.held.delete(c);
    this.batches.delete(b.id);
    this.held.delete(b.m);
    return copies;
  }

  /** Give back the newest batches parked whole for PARK_RETURN_MS (./park-return.ts). */
  private returnParked(): void {
    if (this.stopped || this.memory.paused) return;
    returnParked(this.batches, this.o.pipeline, this.o.clock.now(), (b) => {
      this.letGo(b);
      this.o.progress.untrack(b);
      b.m.nak();
      this.returned++;
    });
  }

  /**
   * A batch handed out that this plane holds (a copy: settled with the first, nats-server#5305) or
   * settled lately (acked again at once): true when dealt with so.
   */
  private holdsOrSettled(id: string, m: JsMsg): boolean {
    const entry = this.batches.get(id);
    if (entry) {
      keepCopy5305(entry, id, m, this.o.logger);
      this.held.set(m, this.o.clock.now());
      return true;
    }
    return this.memory.ackIfSettledHere(id, m);
  }

  /** The connection to NATS is lost: pull nothing until reconnected() has done its work. */
  disconnected(): void {
    this.memory.disconnected();
    this.current?.stop();
  }

  /**
   * The connection is back, maybe to a restarted server that forgot the last seconds: claim what
   * this plane holds (working(), and a record naming it the holder), record what it settled lately
   * as settled, wait for the other planes to do the same, then pull again, looking up every batch
   * handed out for a while (./reconnect.ts).
   */
  reconnected(): Promise<void> {
    return this.memory.reconnected(this.held.keys(), this.batches);
  }

  /** Held batches not yet done tell JetStream they are being worked on (not redelivered elsewhere). */
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
    this.writeTurn();
    this.current?.stop();
    this.wake?.();
    this.pulling?.();
    this.memory.unpause();
    this.keepAlive?.cancel();
    this.parkReturns?.cancel();
    await this.loop;
    this.replays.close();
    this.progressFailures.close();
  }

  /** Batches released at a drain are back in the queue (their records written first). */
  async released(): Promise<void> {
    // the acks of what the drain settled go out now, before the connection closes
    this.writeTurn();
    while (this.releasing.size) await Promise.all([...this.releasing]);
  }
}
