// NATS mode: events from the shared durable consumer `svc-dispatch` into one pipeline. Each
// message is a batch of events (src/bus/hop.ts) and the unit of everything JetStream does: it is
// sealed, acked, nak'd, kept alive and recorded (progress) as a whole, so those costs are paid once
// per batch. It pulls only as many batches as the pipeline has room for (the backlog stays in
// JetStream), drops and counts what the engine did not seal (CONTRACT 6.7), keeps held batches
// alive with `working()`, acks a batch once the pipeline has settled every event of it, and naks a
// batch an event of which the pipeline released at a drain (its record says which events were
// settled and which webhooks the others had, so the next holder repeats nothing else).
//
// Two guards against a nats-server defect (fixed upstream in April 2024, nats-io/nats-server#5305
// and #5338; Debian's 2.9.10 has it): when the server picks an event to redeliver (after a nak)
// while the only pull requests it has are dead ones (their client unsubscribed), it steps the
// consumer back by one and later hands out the last event it delivered once more, as a new
// delivery (delivery count 1), usually to the same data plane. So batches released at a drain are
// nak'd with a delay that outlives this plane's own pull request (the dead one a drain leaves
// behind), and a second copy of a batch this plane already holds is not attempted again: it is
// settled with the first. And a third (the same server): a pull request that expires as an event
// arrives is dropped without the 408 that ends it, so the client's fetch would wait for two missed
// heartbeats (2 s more, nothing pulled meanwhile: every org's events late by up to 3 s); a pull
// request not ended PULL_GRACE_MS after it expired is ended here, and the next pull goes out at once.
//
// A nats-server restart (CONTRACT 6.6: afterwards only attempts in flight when it died are made
// again). A nats-server killed with kill -9 comes back with JetStream state seconds old (measured
// on 2.9: acks and deliveries of up to ~4 s before the kill forgotten): it hands out again, as new
// deliveries (delivery count 1), events this plane still holds and events it settled and acked, to
// this plane or another. So the plane keeps what it knows across the reconnect:
//  - batches it settled (acked) in the last minute: handed out again here, they are acked at once;
//  - at the reconnect, before pulling again, it re-signals `working()` for what it holds and writes
//    progress records (KV svc_progress, key = batch id) naming itself as the holder of each batch it
//    holds, and every batch it settled from ACK_RISK_MS before the disconnect on as settled; then it
//    waits RECONNECT_GRACE_MS, so that every plane has written its records before any pulls;
//  - for SUSPECT_MS after that, every batch handed out is looked up in svc_progress (not only
//    redeliveries): settled elsewhere → acked; held by another plane (recently marked) → nak'd
//    with a delay (its holder's `working()` keeps it from coming back; if the holder died it comes
//    back and is attempted with what the record says was done); else attempted minus what was done.
//
// Fair intake (CONTRACT 8). A batch holds the events of one org (src/handoff/outbox-relay.ts
// publishes one message per org). One handed out while its org has no room left in the pipeline
// (roomFor: its share of the window) is nak'd with a delay (OVER_SHARE_DELAY_MS): that org's
// backlog waits in JetStream, the pull goes on, and the next batch (another org's) is taken at
// once. A batch of several orgs (published before this split) is taken while any of them has room.
//
// Parked batches go back (issue 33). The pipeline parks an org's events while that org has work
// enough queued (src/dataplane/pipeline.ts): taken, held, no attempt yet, so that this plane starts
// them without a trip back to JetStream. Held, they are out of every other plane's reach, and a
// plane that started first would keep a backlog to itself while another plane has nothing to do.
// So a batch parked whole for PARK_RETURN_MS is given back (withdrawn from the pipeline, nak'd
// without delay): the oldest pull request waiting gets it, another plane's if one is idle, else
// this plane's own, which parks it again. The newest go first (the oldest are started next), at
// most PARK_RETURNS_PER_TICK each PARK_RETURN_TICK_MS (16 a second), so going round costs a plane
// alone little.
//
// Replays (CONTRACT 6.7). The relay seals each batch with the time it publishes it; JetStream
// stamps each message with the time it stored it (in the ack subject each delivery carries, so
// reading it costs nothing). A batch stored more than REPLAY_WINDOW_MS after it was sealed was
// published again by someone else, later: dropped and counted `replayed`. A backlog however old
// is delivered (it was stored right after it was sealed), and so are rows a relay publishes late
// after an outage (it seals each publish afresh; the NATS client drops what it buffered while
// disconnected, so nothing sealed before an outage is stored after it). Within the window a copy
// is a JetStream duplicate (same Nats-Msg-Id, 10 min window; a copy without one does not open:
// the batch id is in the seal), and this plane remembers what it settled for longer than the window (at most MAX_SETTLED ids)
// (after a nats-server restart, whose duplicate tracking forgets acked messages). Progress records
// are sealed (HMAC with the data plane key, bound to the batch id): a record someone else wrote is
// ignored. The embedded mode has nothing to replay: its data plane reads the outbox in process.
import type { Logger } from 'pino';
import type { Consumer, JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { sleep, type Clock, type Timer } from '../../domain/clock.ts';
import { decodeRoute } from '../../domain/event-route.ts';
import { DISPATCH_CONSUMER, EVENT_ACK_WAIT_MS, EVENT_ID_HEADER, EVENTS_STREAM, PROGRESS_BUCKET, REPLAY_WINDOW_MS, SEAL_HEADER, storedAtMs } from '../../bus/jetstream.ts';
import { decodeHopBatch } from '../../bus/hop.ts';
import type { Seal } from '../../bus/seal.ts';
import type { DeliveryPipeline, InboundEvent, ProgressStore } from '../pipeline.ts';
import { RepeatedWarnings } from '../../log-summary.ts';

export type DropReason = 'forged' | 'unparseable' | 'replayed';

/** Events asked for in one pull at most (in whole batches, at least one). */
const MAX_PULL = 256;
/** Events in a batch at most (src/handoff/outbox-relay.ts): what a pull assumes before it has seen any. */
const LARGEST_BATCH = 256;
/** How long a pull request waits on the server for events (a stopped plane's last one outlives it that long). */
const PULL_EXPIRES_MS = 2000;
/** A pull request not ended by the server this long after it expired is ended here (see run()). */
const PULL_GRACE_MS = 150;
/** Batches released at a drain come back this much later, once this plane's last pull request has expired. */
export const RELEASE_DELAY_MS = PULL_EXPIRES_MS + 1000;
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

/** A batch parked whole this long is given back to JetStream (see the header), */
export const PARK_RETURN_MS = 500;
/** Parked batches are looked at this often, ... */
export const PARK_RETURN_TICK_MS = 250;
/** ... and at most this many go back each time. */
export const PARK_RETURNS_PER_TICK = 4;

/** Batches settled here are remembered at least this long (and at most MAX_SETTLED of them), to ack them again. */
const SETTLED_MEMORY_MS = 60_000;
const MAX_SETTLED = 100_000;
/** Acks sent this long before a disconnect may be forgotten by a restarted nats-server (measured: ~4 s). */
export const ACK_RISK_MS = EVENT_ACK_WAIT_MS;
/** After a reconnect, no pulling for this long: every plane writes its records first (reconnects are 1 s ± 0.25 s apart). */
export const RECONNECT_GRACE_MS = 2000;
/** Writing the records after a reconnect holds pulling up this long at most. */
const MARK_MAX_MS = 10_000;
/** After a reconnect, batches handed out are looked up in svc_progress for this long. */
export const SUSPECT_MS = 2 * EVENT_ACK_WAIT_MS;

/**
 * What svc_progress says of a batch: the webhooks each of its events had, the events settled (every
 * attempt had an outcome), the plane holding it (since when); or the whole batch settled.
 */
export interface ProgressRecord {
  done: Record<string, string[]>;
  finished: string[];
  holder?: string;
  at?: number;
  settled?: boolean;
}

/** A batch held by this plane: its message and where each of its events stands. */
export interface HeldBatch {
  id: string;
  m: JsMsg;
  /** webhooks each unfinished event has had (from its record, then as the pipeline saves them) */
  readonly done: Map<string, readonly string[]>;
  /** events settled (here, or before, by the record) */
  readonly finished: Set<string>;
  /** the events handed to the pipeline */
  readonly ids: string[];
  /** events still with the pipeline */
  left: number;
  /** an event of it was released (a drain): the batch goes back to the queue */
  released: boolean;
}

/** Which webhooks the events of a redelivered batch already had: NATS KV svc_progress, key = batch id. */
export class KvProgress implements ProgressStore {
  /** batches held here and marked as this plane's after a reconnect: their records keep the mark */
  private readonly marks = new Map<string, { holder: string; at: number }>();
  /** the batch each held event belongs to */
  private readonly batchOf = new Map<string, HeldBatch>();

  constructor(
    private readonly kv: KV,
    private readonly seal: Seal,
    /** a record that does not open with the data plane key (written by someone else): ignored */
    private readonly refused: (batchId: string) => void = () => {},
    /**
     * A plain publish on the bus (the stream behind the bucket stores it; no acknowledgement comes
     * back): for records written as often as events settle. Without it they are put and awaited.
     */
    private readonly publish: ((subject: string, data: string) => void) | null = null,
  ) {}

  /** Events of this batch are with the pipeline: their progress is saved in its record. */
  track(b: HeldBatch): void {
    for (const id of b.ids) this.batchOf.set(id, b);
  }

  /** The batch is no longer held here. */
  untrack(b: HeldBatch): void {
    for (const id of b.ids) this.batchOf.delete(id);
    this.marks.delete(b.id);
  }

  /** A record as stored: under the batch's key, sealed with the data plane key and bound to that key. */
  private sealed(batchId: string, rec: ProgressRecord): { key: string; data: string } {
    const key = progressKey(batchId);
    return { key, data: this.seal.sealRecord(key, JSON.stringify(rec)) };
  }

  private put(batchId: string, rec: ProgressRecord): Promise<number> {
    const { key, data } = this.sealed(batchId, rec);
    return this.kv.put(key, data);
  }

  /** A held batch's record as it stands. */
  private recordOf(b: HeldBatch): ProgressRecord {
    return { done: Object.fromEntries(b.done) as Record<string, string[]>, finished: [...b.finished], ...this.marks.get(b.id) };
  }

  /** Write a held batch's record now. */
  write(b: HeldBatch): Promise<number> {
    return this.put(b.id, this.recordOf(b));
  }

  /**
   * Send a held batch's record without waiting for it to be stored: it is on its way as an ack
   * would be (records of one batch are stored in the order they are sent, on one connection).
   */
  async send(b: HeldBatch): Promise<void> {
    if (!this.publish) {
      await this.write(b);
      return;
    }
    const { key, data } = this.sealed(b.id, this.recordOf(b));
    this.publish(`$KV.${PROGRESS_BUCKET}.${key}`, data);
  }

  /** ProgressStore: the pipeline's progress of some events; one record per batch they belong to. */
  async save(events: ReadonlyArray<{ event: InboundEvent; done: readonly string[] }>): Promise<void> {
    const batches = new Set<HeldBatch>();
    for (const e of events) {
      const b = this.batchOf.get(e.event.id);
      if (!b || b.finished.has(e.event.id)) continue;
      b.done.set(e.event.id, e.done);
      batches.add(b);
    }
    await Promise.all([...batches].map((b) => this.write(b)));
  }

  async load(batchId: string): Promise<ProgressRecord | null> {
    const key = progressKey(batchId);
    const e = await this.kv.get(key);
    if (!e || e.operation !== 'PUT') return null;
    const text = this.seal.openRecord(key, e.string());
    if (text === null) {
      this.refused(batchId);
      return null;
    }
    try {
      const v = JSON.parse(text) as unknown;
      if (!v || typeof v !== 'object' || Array.isArray(v)) return null;
      const o = v as Record<string, unknown>;
      const strings = (a: unknown) => (Array.isArray(a) ? a.filter((x): x is string => typeof x === 'string') : []);
      const done: Record<string, string[]> = {};
      if (o.done && typeof o.done === 'object' && !Array.isArray(o.done)) for (const [id, hooks] of Object.entries(o.done)) done[id] = strings(hooks);
      const rec: ProgressRecord = { done, finished: strings(o.finished) };
      if (typeof o.holder === 'string') rec.holder = o.holder;
      if (typeof o.at === 'number') rec.at = o.at;
      if (o.settled === true) rec.settled = true;
      return rec;
    } catch {
      return null;
    }
  }

  /**
   * Write these records (an unsettled one with a holder keeps its mark in later saves), trying
   * again what fails until `deadline` (ms, clock time) or `stopped()`. Resolves how many were not written.
   */
  async mark(records: ReadonlyArray<{ id: string; rec: ProgressRecord }>, clock: Clock, deadline: number, stopped: () => boolean): Promise<number> {
    for (const { id, rec } of records) if (rec.holder && !rec.settled) this.marks.set(id, { holder: rec.holder, at: rec.at ?? clock.now() });
    let left = [...records];
    while (left.length && !stopped()) {
      const failed: typeof left = [];
      for (let i = 0; i < left.length; i += 256) {
        const chunk = left.slice(i, i + 256);
        const results = await Promise.allSettled(chunk.map((r) => this.put(r.id, r.rec)));
        results.forEach((r, j) => r.status === 'rejected' && failed.push(chunk[j]));
      }
      left = failed;
      if (!left.length || clock.now() >= deadline) break;
      await sleep(clock, 250);
    }
    return left.length;
  }
}

/** KV keys allow [-/_=.a-zA-Z0-9]: batch ids are event ids (UUIDs, or a recovery item's `<uuid>.<rcv id>`). */
const progressKey = (batchId: string) => batchId.replace(/[^-/_=.a-zA-Z0-9]/g, '_');

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
  /** batches settled (acked) here lately, oldest first, and when */
  private readonly settled = new Map<string, number>();
  /** while disconnected (and the grace after): pulling waits for this */
  private gate: { promise: Promise<void>; open(): void } | null = null;
  private disconnectedAt: number | null = null;
  private epoch = 0;
  private suspectUntil = 0;
  /** since the last summary: batches acked again (settled here or elsewhere), deferred (held elsewhere) */
  private readonly counts = { reacked: 0, settledElsewhere: 0, heldElsewhere: 0 };
  private readonly replayWindowMs: number;
  /** how long settled batches are remembered: longer than the replay window (see the header) */
  private readonly settledMemoryMs: number;
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
      'a batch of events stored long after the engine sealed it was dropped: published again by someone (a replay), or the clocks of the engine and the nats-server differ by more than the replay window',
    );
    this.progressFailures = new RepeatedWarnings(o.logger, o.clock, 'could not record the events of a batch settled so far; if this plane dies they are attempted again');
    this.replayWindowMs = o.replayWindowMs ?? REPLAY_WINDOW_MS;
    this.settledMemoryMs = Math.max(SETTLED_MEMORY_MS, this.replayWindowMs + EVENT_ACK_WAIT_MS);
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
      this.forgetSettled();
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
      if (this.gate) {
        await this.gate.promise;
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
        const epoch = this.epoch;
        const batchSize = Math.max(...this.recentSizes);
        // after a pull that was all deferred, a larger one: what is behind them (another org's) comes sooner
        const wanted = Math.max(1, Math.floor(Math.min(room, MAX_PULL) / batchSize), this.skipping ? DEFERRED_PULL : 0);
        const batch = await consumer.fetch({ max_messages: wanted, expires: PULL_EXPIRES_MS });
        this.current = batch;
        // nats-server 2.9 may let an expired pull request go without a word (no 408): the client
        // would learn it only from missed heartbeats, seconds later, pulling nothing meanwhile
        deadline = this.o.clock.setTimeout(() => {
          this.overdue++;
          batch.stop();
        }, PULL_EXPIRES_MS + PULL_GRACE_MS);
        this.pulling?.();
        this.pulling = null;
        const deferredBefore = this.deferred;
        let handedOut = 0;
        for await (const m of batch) {
          handedOut++;
          if (this.stopped) m.nak(RELEASE_DELAY_MS);
          else if (this.epoch === epoch) await this.take(m, epoch);
          // else handed out before the connection was lost: not taken (neither acked nor nak'd), it
          // comes back from the server, which may have forgotten it or handed it out again meanwhile
        }
        if (failing) this.o.logger.warn('pulling events again');
        failing = false;
        this.skipping = handedOut > 0 && this.deferred - deferredBefore === handedOut;
        if (this.skipping && !this.stopped) {
          // every batch of this pull was deferred (their orgs are at their share): pull again once
          // an event settles, or shortly (another org's batch may be next), not at once
          await new Promise<void>((r) => {
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
      this.replays.warn({ subject: m.subject }, { batch_id: id, events: events.length, stored_after_ms: Math.round(late), window_ms: this.replayWindowMs });
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
    if (m.redelivered || this.o.clock.now() < this.suspectUntil) {
      try {
        rec = await this.o.progress.load(id);
        if (rec?.settled) {
          // settled by another plane whose ack the restarted server forgot
          this.counts.settledElsewhere++;
          m.ack();
          return;
        }
        if (rec?.holder && rec.holder !== this.o.workerId && rec.at !== undefined && this.o.clock.now() - rec.at < EVENT_ACK_WAIT_MS) {
          // still held by the plane that had it before the server restarted: leave it to that one
          // (its working() keeps this delivery from coming back; if it died, it comes back later)
          this.counts.heldElsewhere++;
          m.nak(EVENT_ACK_WAIT_MS);
          return;
        }
      } catch (err) {
        if (this.epoch !== epoch) return; // the connection was lost meanwhile: see run()
        rec = null;
        this.o.logger.warn({ batch_id: id, err: String(err) }, 'could not read delivery progress; attempting every webhook');
      }
      if (this.epoch !== epoch) return;
      if (this.holdsOrSettled(id, m)) return;
    }
    this.recentSizes.push(events.length);
    if (this.recentSizes.length > 16) this.recentSizes.shift();
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
      this.o.progress.send(d).catch((err: unknown) => this.progressFailures.warn({ reason: 'settled events' }, { batch_id: d.id, err: String(err) }));
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
      for (const c of copies) this.acks.push(c);
      this.acks.push(b.m);
      this.atEndOfTurn();
      this.settled.set(b.id, this.o.clock.now());
      return;
    }
    // what its events had goes with it (the pipeline saved the unfinished ones' progress before releasing them)
    const writing = (b.finished.size || b.done.size ? this.o.progress.write(b).then(() => undefined) : Promise.resolve())
      .catch((err: unknown) => this.o.logger.warn({ batch_id: b.id, err: String(err) }, 'could not record the progress of a released batch; its settled events will be attempted again'))
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

  /**
   * Give back the newest batches whose events have all been parked for PARK_RETURN_MS (see the
   * header). Only a batch with nothing to record: none of its events settled or attempted before.
   */
  private returnParked(): void {
    if (this.stopped || this.gate) return;
    const now = this.o.clock.now();
    const entries = [...this.batches.values()];
    let n = 0;
    for (let i = entries.length - 1; i >= 0 && n < PARK_RETURNS_PER_TICK; i--) {
      const { batch: b, copies } = entries[i];
      if (copies.length || b.released || b.finished.size || b.done.size || b.left !== b.ids.length || !b.ids.length) continue;
      const since = this.o.pipeline.parkedSince(b.ids[0]);
      if (since === undefined || now - since < PARK_RETURN_MS) continue;
      if (!this.o.pipeline.withdraw(b.ids)) continue;
      this.letGo(b);
      this.o.progress.untrack(b);
      b.m.nak();
      this.returned++;
      n++;
    }
  }

  /**
   * A batch handed out that this plane holds (a copy: settled with the first) or settled lately
   * (acked again at once): true when dealt with so.
   */
  private holdsOrSettled(id: string, m: JsMsg): boolean {
    const entry = this.batches.get(id);
    if (entry) {
      // already held here: the same batch handed out again (see the header), not a new one
      this.o.logger.warn({ batch_id: id, stream_seq: m.seq, deliveries: m.info.deliveryCount }, 'JetStream handed out a batch of events this data plane already holds; it is not attempted twice');
      entry.copies.push(m);
      this.held.set(m, this.o.clock.now());
      return true;
    }
    if (this.settled.has(id)) {
      this.counts.reacked++;
      m.ack();
      return true;
    }
    return false;
  }

  private forgetSettled(): void {
    const before = this.o.clock.now() - this.settledMemoryMs;
    for (const [id, at] of this.settled) {
      if (at >= before && this.settled.size <= MAX_SETTLED) break;
      this.settled.delete(id);
    }
    const c = this.counts;
    if (c.reacked || c.settledElsewhere || c.heldElsewhere) {
      this.o.logger.warn(
        { settled_here: c.reacked, settled_elsewhere: c.settledElsewhere, held_elsewhere: c.heldElsewhere },
        'JetStream handed out again batches already settled or held (a nats-server restart forgot acks and deliveries); acked or left to their holder, not attempted again',
      );
      c.reacked = c.settledElsewhere = c.heldElsewhere = 0;
    }
  }

  /** The connection to NATS is lost: pull nothing until reconnected() has done its work. */
  disconnected(): void {
    this.epoch++;
    this.disconnectedAt ??= this.o.clock.now();
    if (!this.gate) {
      let open!: () => void;
      const promise = new Promise<void>((r) => (open = r));
      this.gate = { promise, open };
    }
    this.current?.stop();
  }

  /**
   * The connection is back, maybe to a restarted server that forgot the last seconds: claim what
   * this plane holds (working(), and a record naming it the holder), record what it settled lately
   * as settled, wait for the other planes to do the same, then pull again, looking up every batch
   * handed out for a while.
   */
  async reconnected(): Promise<void> {
    const epoch = ++this.epoch;
    const now = this.o.clock.now();
    const since = (this.disconnectedAt ?? now) - ACK_RISK_MS;
    for (const m of this.held.keys()) m.working();
    const records: Array<{ id: string; rec: ProgressRecord }> = [];
    for (const { batch: b } of this.batches.values()) {
      // what each unfinished event has had so far, as the pipeline knows it now
      const done: Record<string, string[]> = {};
      for (const id of b.ids) if (!b.finished.has(id)) done[id] = [...(this.o.pipeline.attempted(id) ?? b.done.get(id) ?? [])];
      records.push({ id: b.id, rec: { done, finished: [...b.finished], holder: this.o.workerId, at: now } });
    }
    // a settled record is acked wherever it is handed out again: what the batch had does not matter
    for (const [id, at] of this.settled) if (at >= since) records.push({ id, rec: { done: {}, finished: [], holder: this.o.workerId, at: now, settled: true } });
    const unwritten = await this.o.progress.mark(records, this.o.clock, now + MARK_MAX_MS, () => this.stopped || this.epoch !== epoch);
    if (this.epoch !== epoch) return; // disconnected again meanwhile: the next reconnect does it again
    this.o.logger.warn({ held: this.batches.size, records: records.length, unwritten }, 'reconnected to NATS: recorded what this data plane holds and settled lately; pulling again shortly');
    const wait = now + RECONNECT_GRACE_MS - this.o.clock.now();
    if (wait > 0) await new Promise<void>((r) => this.o.clock.setTimeout(r, wait));
    if (this.epoch !== epoch) return;
    this.disconnectedAt = null;
    this.suspectUntil = this.o.clock.now() + SUSPECT_MS;
    const gate = this.gate;
    this.gate = null;
    gate?.open();
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
    this.gate?.open();
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
