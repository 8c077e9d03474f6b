// The delivery pipeline of one data plane (a worker thread, a `svc worker`, or embedded mode):
// events in, attempts out, each event settled (acked, or its outbox row done) only once every
// attempt it needs has an outcome (CONTRACT 6.6).
//
//   event ─▶ registry.match(route) ─▶ one attempt per webhook ─▶ per-webhook queue (8 in flight)
//                                                                   └▶ slots (concurrency), fair
//                                                                      across orgs then webhooks
//
// The slots (./slots.ts) are shared so that one org's hanging receivers cost another org, and the
// org's other webhooks, at most a second (CONTRACT 8): they follow what each org and webhook holds
// now (attempts in flight, and which of them have run longer than a fast attempt). Round robin
// over orgs, a share cap while others wait, a floor of free slots that only an org holding few may
// take, within an org's room a reserve that only webhooks with no attempt hanging may fill, and 1
// in flight for a webhook whose recent attempts all failed.
//
// Intake is fair too (CONTRACT 8, ARCHITECTURE "intake: a fair share of the window per org"): a
// source hands over an org's events only while roomFor(org) says so, and the rest of that org's
// backlog waits in the durable queue (the outbox, JetStream), never here. An org holds at most an
// equal part of the window among the orgs holding events and one more (so there is always room for
// a newcomer), and stops taking events while its queued attempts exceed their part of maxQueued.
// Any org may hold minOrgEvents whatever the others hold, out of a reserve above the window:
// however many orgs hang, another org's events are taken at once. Memory stays bounded whatever
// the fan-out: maxEvents + reserve events, maxQueued attempts.
//
// Parked events. An org whose "pressure" (the backlog that will drain soon: at most 32 queued
// attempts of each of its webhooks known fast with none hanging, or not yet tried, the slots' pressureOf) has reached
// 4 × concurrency has work enough queued: its next events are held without attempts (parked, in
// order) and fanned out as its pressure falls. Parked, an event costs its bytes and no attempts,
// and starts the moment there is room, with no trip back to the durable queue; a source may give
// back events parked for a while (withdraw), for another data plane with nothing to do.
//
// Webhooks already attempted for an event are recorded (progress) when the event is slow to
// finish, so a redelivered event repeats only the attempts that were in flight.
//
// Ordered webhooks (CONTRACT 10.1, `delivery: {ordering: "per_key"}`): each ordering key of such a
// webhook is a line (KeyLine): its head attempt is queued in the slots or in flight, the rest wait
// behind it in the order their events came, and the next goes to the slots only once the head has
// an outcome (success or failure: still one attempt each). Keys go in parallel within the same
// slots (8 per webhook, the fair shares); a key whose receiver hangs holds one slot and its own
// line. Recovery items are not in a line (they fill a gap the receiver asked for).
//
// A webhook deleted (the registry no longer has it) or disabled (its entry says so, CONTRACT 4.1)
// loses its queued attempts at once (dropWebhook, counted `webhook_deleted` or `webhook_disabled`);
// its attempt in flight finishes. A disabled webhook's matches are dropped at fan-out, counted too.
import type { Logger } from 'pino';
import { nextTurnOnce, within, type Clock, type Timer } from '../domain/clock.ts';
import type { EventRoute } from '../domain/event-route.ts';
import type { WebhookRegistry } from '../dispatch/registry.ts';
import type { WebhookSubscriber } from '../dispatch/subscriber.ts';
import type { AttemptResult, Deliverer } from '../delivery/client.ts';
import { RECOVERY_HEADER } from '../delivery/signing.ts';
import { outcomeOf, type BacklogReport, type DeliveryOutcome } from '../outcomes/outcome.ts';
import { RepeatedWarnings } from '../log-summary.ts';
import { Fifo } from '../domain/fifo.ts';
import { FairSlots, type Grant } from './slots.ts';

export interface InboundEvent {
  id: string;
  route: EventRoute;
  /** the exact CloudEvent bytes to POST */
  body: Buffer;
  /** webhooks already attempted before (a redelivered event) */
  done: readonly string[];
  /** every attempt it needs has an outcome: take it off the durable queue */
  settle(): void;
  /** the pipeline stops before finishing it: leave it queued for the next process */
  release(): void;
}

export interface OutcomeSink {
  record(o: DeliveryOutcome): void;
  flush(): Promise<void>;
}

/** Where the webhooks already attempted for an event are kept, for a redelivery. */
export interface ProgressStore {
  save(events: ReadonlyArray<{ event: InboundEvent; done: readonly string[] }>): Promise<void>;
}

/** Signature and id headers of one attempt (CONTRACT 6.4). */
export type Signer = (sub: WebhookSubscriber, eventId: string, body: Buffer, nowMs: number) => Record<string, string>;

export interface PipelineOptions {
  registry: WebhookRegistry;
  deliverer: Deliverer;
  sign: Signer;
  outcomes: OutcomeSink;
  progress: ProgressStore | null;
  clock: Clock;
  logger: Logger;
  /** attempts in flight at most, all webhooks together (CONTRACT 1: default 256) */
  concurrency: number;
  /** attempts in flight at most per webhook (8) */
  perWebhook?: number;
  /** events held at most (default 5000) */
  maxEvents?: number;
  /** attempts queued at most, all webhooks together (default 100 000) */
  maxQueued?: number;
  /** events any org may hold however full the window is, out of a reserve above it (default 64) */
  minOrgEvents?: number;
  /** events held above maxEvents at most, for orgs under minOrgEvents (default maxEvents / 4) */
  reserveEvents?: number;
  /** events taken off the queue and not delivered (a deleted webhook's queued attempts) */
  dropped?: (reason: PipelineDropReason, events: number) => void;
  /** an event still unfinished after this long gets its progress recorded, and again as it goes on (default 50 ms) */
  progressAfterMs?: number;
  /** how long an event waits for the registry revision it names (default 2 s) */
  registryWaitMs?: number;
  /**
   * An org the last backlogReport() called backlogged has an attempt that started promptly: its
   * deliveries no longer queue, and the control plane would like to know now, not at the next batch
   */
  caughtUp?: () => void;
  /**
   * The attempts an answer frees slots for start at the end of this turn of the event loop
   * (setImmediate), not within the answer's callback: after what settled in the turn is recorded
   * by the source (it records at the end of the turn too, scheduled first). A receiver then never
   * sees an attempt before the records of those answered before it are handed to the bus, so a
   * kill -9 repeats only attempts in flight (CONTRACT 6.6). Data planes set it; default false.
   */
  startAfterTurn?: boolean;
}

/** Why the pipeline takes an event off the queue without an attempt at a webhook it matched. */
export type PipelineDropReason = 'webhook_deleted' | 'webhook_disabled';

/** The failed outcome a recovery item gets when it is dropped, so that its recovery still comes to an end. */
const DROPPED_ERROR: Record<PipelineDropReason, string> = {
  webhook_deleted: 'the webhook no longer exists',
  webhook_disabled: 'the webhook is disabled',
};

/** Attempts in flight at most per webhook (CONTRACT 6.6). */
export const PER_WEBHOOK_IN_FLIGHT = 8;

/**
 * An org whose attempts all waited at least this long here before they started has its deliveries
 * queued (backlogReport): an event of it taken now waits about as long behind them.
 */
export const BACKLOG_WAIT_MS = 20;

/** failing webhooks whose failures the log follows one by one (the rest are summed up together) */
const FAILING_WEBHOOKS_LOGGED = 100;

interface EventState {
  ev: InboundEvent;
  remaining: number;
  done: string[];
  saved: number;
  since: number;
  /** when it was parked (clock ms), null while not parked */
  parked: number | null;
}

interface Attempt {
  state: EventState;
  sub: WebhookSubscriber;
  /** the ordering key's line it is in (a `per_key` webhook, CONTRACT 10.1); null: not ordered */
  line: KeyLine | null;
}

/**
 * One ordering key of one `per_key` webhook (CONTRACT 10.1): its attempt at the head is queued in
 * the slots or in flight, the rest wait here in order; the next one goes to the slots only once the
 * head's attempt has an outcome. So each key has at most one attempt in the slots, and a key whose
 * receiver hangs holds one of its webhook's slots and nothing else.
 */
interface KeyLine {
  webhook: string;
  key: string;
  waiting: Fifo<Attempt>;
  /** the head attempt has started (it is in flight, not queued in the slots) */
  started: boolean;
}

export class DeliveryPipeline {
  private readonly o: Required<Omit<PipelineOptions, 'progress'>> & { progress: ProgressStore | null };
  private readonly events = new Map<string, EventState>();
  /** events held per org (orgs holding none are not in it) */
  private readonly orgHeld = new Map<string, number>();
  private readonly slots: FairSlots<Attempt>;
  private stopped = false;
  /** a pump at the next turn, once however often asked (startAfterTurn) */
  private readonly pumpAfterTurn = nextTurnOnce(() => this.pump());
  private freeListeners: Array<() => void> = [];
  private readonly progressTimer: Timer | null;
  /** failed attempts in the log: each webhook's first in full, then its count every 10 s (CONTRACT §8) */
  private readonly failures: RepeatedWarnings;
  private idle: Array<() => void> = [];
  /** the ordering keys of `per_key` webhooks with an attempt queued or in flight, by webhook then key */
  private readonly lines = new Map<string, Map<string, KeyLine>>();
  /** per org, events taken and not yet fanned out (its pressure is at its bound), oldest first; withdrawn ones are skipped */
  private readonly parked = new Map<string, Fifo<EventState>>();
  private parkedCount = 0;
  /** per org, the shortest wait (taken → started, ms) of its attempts started since backlogReport() last ran */
  private readonly waits = new Map<string, number>();
  /** the orgs the last backlogReport() called backlogged and none of whose attempts has started promptly since */
  private reported = new Set<string>();
  /** ...and those of them one of whose attempts has */
  private caughtUp: string[] = [];

  constructor(opts: PipelineOptions) {
    this.o = {
      perWebhook: PER_WEBHOOK_IN_FLIGHT,
      maxEvents: 5000,
      maxQueued: 100_000,
      minOrgEvents: 64,
      reserveEvents: Math.floor((opts.maxEvents ?? 5000) / 4),
      progressAfterMs: 50,
      registryWaitMs: 2000,
      dropped: () => {},
      caughtUp: () => {},
      startAfterTurn: false,
      ...opts,
    };
    this.slots = new FairSlots({ clock: opts.clock, concurrency: this.o.concurrency, perWebhook: this.o.perWebhook });
    this.failures = new RepeatedWarnings(opts.logger, opts.clock, 'webhook delivery failed', { maxSources: FAILING_WEBHOOKS_LOGGED });
    opts.registry.onRemoved((_org, webhookId) => this.dropWebhook(webhookId));
    opts.registry.onDisabled((_org, webhookId) => this.dropWebhook(webhookId, 'webhook_disabled'));
    this.progressTimer = opts.progress ? opts.clock.setInterval(() => void this.saveProgress(false), this.o.progressAfterMs) : null;
  }

  /** Attempts in flight. */
  inFlight(): number {
    return this.slots.inFlight;
  }

  /**
   * The orgs whose deliveries queue here (`backlogged`: every attempt of theirs started since the
   * previous call waited at least BACKLOG_WAIT_MS after its event was taken; an org none of whose
   * attempts started is not among them), and those of the previous call's that no longer do
   * (`caughtUp`: one of their attempts started sooner since). Each call starts the record again.
   */
  backlogReport(): BacklogReport {
    const backlogged: string[] = [];
    for (const [org, waited] of this.waits) if (waited >= BACKLOG_WAIT_MS) backlogged.push(org);
    this.waits.clear();
    const caughtUp = this.caughtUp;
    this.caughtUp = [];
    this.reported = new Set(backlogged);
    return { backlogged, caughtUp };
  }

  /** The webhooks an event held here has had so far (undefined when it is not held). */
  attempted(eventId: string): readonly string[] | undefined {
    return this.events.get(eventId)?.done;
  }

  /** Events held (matched or waiting, not yet settled). */
  held(): number {
    return this.events.size;
  }

  /** Events held without attempts yet, waiting for their org's pressure to fall. */
  parkedEvents(): number {
    return this.parkedCount;
  }

  /** When an event held here was parked (clock ms), or undefined when it is not held or not parked. */
  parkedSince(eventId: string): number | undefined {
    return this.events.get(eventId)?.parked ?? undefined;
  }

  /**
   * Give back events taken and still parked (no attempt made): when every one of them is, they are
   * no longer held here (neither settled nor released: the caller puts them back in the durable
   * queue) and true is returned; else nothing changes.
   */
  withdraw(eventIds: readonly string[]): boolean {
    const states: EventState[] = [];
    for (const id of eventIds) {
      const s = this.events.get(id);
      if (!s || s.parked === null) return false;
      states.push(s);
    }
    for (const s of states) {
      s.parked = null;
      this.parkedCount--;
      this.unhold(s);
    }
    this.notify();
    return true;
  }

  /** Events held of one org. */
  heldOf(org: string): number {
    return this.orgHeld.get(org) ?? 0;
  }

  /**
   * How many more events the pipeline may take now, all orgs together (0 when it is full or
   * stopping): what a source may pull at most. Which org's events it takes: roomFor.
   */
  room(): number {
    if (this.stopped || this.slots.queued >= this.o.maxQueued) return 0;
    return Math.max(0, this.o.maxEvents + this.o.reserveEvents - this.events.size);
  }

  /**
   * How many more events of this org the pipeline takes now: what is left of its share of the
   * window (an equal part among the orgs holding events and one more), while its queued attempts
   * are within their part of maxQueued; else what is left of minOrgEvents (from the reserve).
   */
  roomFor(org: string): number {
    const total = this.room();
    if (total === 0) return 0;
    const held = this.heldOf(org);
    let n = this.o.minOrgEvents - held;
    const orgs = this.orgHeld.size + (held > 0 ? 0 : 1);
    const share = Math.floor(this.o.maxEvents / (orgs + 1));
    if (this.events.size < this.o.maxEvents && this.slots.queuedOf(org) < Math.floor(this.o.maxQueued / (orgs + 1))) {
      n = Math.max(n, Math.min(share - held, this.o.maxEvents - this.events.size));
    }
    return Math.max(0, Math.min(n, total));
  }

  /** Calls fn once, the next time room() may have grown. */
  whenRoom(fn: () => void): void {
    this.freeListeners.push(fn);
  }

  /** Take an event. Never throws; a stopped pipeline releases it at once. */
  accept(ev: InboundEvent): void {
    if (this.stopped) {
      ev.release();
      return;
    }
    const state: EventState = { ev, remaining: 0, done: [...ev.done], saved: ev.done.length, since: this.o.clock.now(), parked: null };
    this.hold(state);
    const rev = ev.route.rev;
    if (rev > this.o.registry.revision) {
      // the registry catching up, or registryWaitMs on the clock: whichever comes first
      void within(this.o.clock, this.o.registry.reached(rev), this.o.registryWaitMs).then(() => {
        if (this.o.registry.revision < rev) {
          this.o.logger.warn(
            { event_id: ev.id, rev, registry_rev: this.o.registry.revision },
            'webhook registry behind the event; matching with what it has',
          );
        }
        this.fanOut(state);
      });
      return;
    }
    this.fanOut(state);
  }

  private hold(state: EventState): void {
    this.events.set(state.ev.id, state);
    const org = state.ev.route.org;
    this.orgHeld.set(org, this.heldOf(org) + 1);
  }

  private unhold(state: EventState): void {
    if (!this.events.delete(state.ev.id)) return;
    const org = state.ev.route.org;
    const n = this.heldOf(org) - 1;
    if (n > 0) this.orgHeld.set(org, n);
    else this.orgHeld.delete(org);
  }

  /** Pressure at which an org's next events are parked. */
  private get pressureBound(): number {
    return 4 * this.o.concurrency;
  }

  /** Fan out now, or park behind the org's parked events while its pressure is at its bound. */
  private fanOut(state: EventState): void {
    const org = state.ev.route.org;
    // its pressure may have fallen with no attempt of it ending (attempts found hanging no longer count)
    if (this.parked.has(org)) this.unpark(org);
    if (!this.stopped && (this.parked.has(org) || this.slots.pressureOf(org) >= this.pressureBound)) {
      let q = this.parked.get(org);
      if (!q) this.parked.set(org, (q = new Fifo()));
      q.push(state);
      state.parked = this.o.clock.now();
      this.parkedCount++;
      return;
    }
    this.fanOutNow(state);
  }

  /** Fan out the org's parked events, oldest first, while its pressure is below its bound. */
  private unpark(org: string): void {
    const q = this.parked.get(org);
    if (!q) return;
    while (q.size && this.slots.pressureOf(org) < this.pressureBound) {
      const s = q.shift()!;
      if (s.parked === null) continue; // withdrawn
      s.parked = null;
      this.parkedCount--;
      this.fanOutNow(s);
    }
    if (!q.size) this.parked.delete(org);
  }

  private fanOutNow(state: EventState): void {
    if (this.stopped && state.remaining === 0) {
      this.unhold(state);
      state.ev.release();
      return;
    }
    const done = state.done.length ? new Set(state.done) : null;
    const subs = this.targets(state);
    let disabled = 0;
    for (const sub of subs) {
      if (done?.has(sub.id)) continue;
      if (sub.disabled) {
        disabled++;
        continue;
      }
      state.remaining++;
      const key = sub.entry.ordering === 'per_key' && !state.ev.route.recovery ? state.ev.route.key : undefined;
      if (key === undefined) this.enqueue({ state, sub, line: null });
      else this.enqueueInLine(state, sub, key);
    }
    if (disabled) this.o.dropped('webhook_disabled', disabled);
    if (state.remaining === 0) this.settle(state);
    else this.pump();
  }

  /**
   * The webhooks an event goes to: those whose subscription admits it, or for a recovery item
   * (CONTRACT 4.5) its one webhook, matched when the recovery was asked for. A recovery item whose
   * webhook is gone or disabled gets a failed outcome, so that its recovery still comes to an end.
   */
  private targets(state: EventState): WebhookSubscriber[] {
    const route = state.ev.route;
    if (!route.recovery) return this.o.registry.match(route, state.ev.body);
    const sub = this.o.registry.get(route.org, route.recovery.webhook);
    if (sub && !sub.disabled) return [sub];
    const r = route.recovery;
    const reason: PipelineDropReason = sub ? 'webhook_disabled' : 'webhook_deleted';
    if (sub) this.o.dropped(reason, 1);
    this.o.outcomes.record(
      outcomeOf(
        { webhook_id: r.webhook, org_id: route.org, event_id: r.event_id, type: route.type, recovery_id: r.id },
        { delivered: false, error: DROPPED_ERROR[reason], duration_ms: 0 },
        this.o.clock.now(),
      ),
    );
    return [];
  }

  private enqueue(a: Attempt): void {
    this.slots.push(a.sub.org, a.sub.id, a);
  }

  /** An attempt of a `per_key` webhook: to the slots when its key has none there or in flight, else behind it. */
  private enqueueInLine(state: EventState, sub: WebhookSubscriber, key: string): void {
    let byKey = this.lines.get(sub.id);
    if (!byKey) this.lines.set(sub.id, (byKey = new Map()));
    const line = byKey.get(key);
    if (line) {
      line.waiting.push({ state, sub, line });
      return;
    }
    const fresh: KeyLine = { webhook: sub.id, key, waiting: new Fifo(), started: false };
    byKey.set(key, fresh);
    this.enqueue({ state, sub, line: fresh });
  }

  /** The head of a key's line has an outcome: its next attempt goes to the slots, or the line ends. */
  private nextInLine(line: KeyLine): void {
    const next = line.waiting.shift();
    if (next) {
      line.started = false;
      this.enqueue(next);
      return;
    }
    const byKey = this.lines.get(line.webhook);
    if (byKey?.get(line.key) !== line) return; // dropped meanwhile
    byKey.delete(line.key);
    if (!byKey.size) this.lines.delete(line.webhook);
  }

  /**
   * The head of a key's line has an outcome and its event is still held for other webhooks: its
   * progress (this webhook done) is recorded before the key's next attempt starts, so that a
   * process killed after that next attempt never makes this one again after it (a key never goes
   * backwards across kill -9, CONTRACT 10.1). A settled event needs nothing more: its end is
   * recorded before any attempt started after it reaches its webhook (the sources).
   */
  private recordThenNext(state: EventState, line: KeyLine): void {
    const before = state.saved;
    state.saved = state.done.length;
    this.o
      .progress!.save([{ event: state.ev, done: [...state.done] }])
      .catch((err) => {
        state.saved = Math.min(state.saved, before);
        this.o.logger.warn(
          { err: String(err), event_id: state.ev.id },
          'could not record delivery progress before the next event of its key',
        );
      })
      .finally(() => {
        if (this.stopped) return;
        this.nextInLine(line);
        this.pump();
      });
  }

  /** A webhook deleted or disabled: its keys' waiting attempts, taken out; lines whose head is not in flight end. */
  private dropLines(webhookId: string): Attempt[] {
    const byKey = this.lines.get(webhookId);
    if (!byKey) return [];
    const out: Attempt[] = [];
    for (const [key, line] of byKey) {
      for (let a = line.waiting.shift(); a; a = line.waiting.shift()) out.push(a);
      if (!line.started) byKey.delete(key);
    }
    if (!byKey.size) this.lines.delete(webhookId);
    return out;
  }

  /** Start queued attempts while the slots give one (fair across orgs, then webhooks). */
  private pump(): void {
    for (let g = this.slots.next(); g; g = this.slots.next()) {
      this.start(g);
    }
  }

  private start(g: Grant<Attempt>): void {
    const sub = g.item.sub;
    if (g.item.line) g.item.line.started = true;
    const ev = g.item.state.ev;
    const recovery = ev.route.recovery;
    const now = this.o.clock.now();
    const waited = now - g.item.state.since;
    const shortest = this.waits.get(sub.org);
    if (shortest === undefined || waited < shortest) {
      this.waits.set(sub.org, waited);
      // the end of a backlog the control plane was told of is told at once (its facts are held meanwhile)
      if (waited < BACKLOG_WAIT_MS && this.reported.delete(sub.org)) {
        this.caughtUp.push(sub.org);
        this.o.caughtUp();
      }
    }
    const headers = this.o.sign(sub, recovery?.event_id ?? ev.id, ev.body, now);
    if (recovery) headers[RECOVERY_HEADER] = recovery.id;
    this.o.deliverer.send(sub.entry.url, headers, ev.body, (r) => this.finish(g, r));
  }

  private finish(g: Grant<Attempt>, r: AttemptResult): void {
    this.slots.done(g, r.delivered);
    const state = g.item.state;
    const sub = g.item.sub;
    const ev = state.ev;
    const recovery = ev.route.recovery;
    const outcome = outcomeOf(
      {
        webhook_id: sub.id,
        org_id: sub.org,
        event_id: recovery ? recovery.event_id : ev.id,
        type: ev.route.type,
        recovery_id: recovery?.id,
      },
      r,
      this.o.clock.now(),
    );
    this.o.outcomes.record(outcome);
    if (!r.delivered) {
      // the host only: never the path, query or a secret of the URL
      const { event_id, type, status, error, duration_ms } = outcome;
      this.failures.warn(
        { org_id: outcome.org_id, webhook_id: outcome.webhook_id },
        { event_id, type, outcome: 'failure', status, error, duration_ms, host: this.o.deliverer.hostOf(sub.entry.url) },
      );
    }
    state.done.push(sub.id);
    if (--state.remaining === 0) this.settle(state);
    if (g.item.line && !this.stopped) {
      if (state.remaining > 0 && this.o.progress) this.recordThenNext(state, g.item.line);
      else this.nextInLine(g.item.line);
    }
    this.unpark(sub.org);
    if (this.o.startAfterTurn) this.pumpAfterTurn();
    else this.pump();
    this.notify();
  }

  private settle(state: EventState): void {
    this.unhold(state);
    state.ev.settle();
    this.notify();
  }

  /**
   * A webhook was deleted or disabled (CONTRACT 8): its queued attempts are dropped at once and
   * counted (`webhook_deleted`), and an event waiting only for them settles; an attempt of it in
   * flight finishes. Returns how many attempts were dropped.
   */
  dropWebhook(webhookId: string, reason: PipelineDropReason = 'webhook_deleted'): number {
    const dropped = this.slots.drop(webhookId);
    dropped.push(...this.dropLines(webhookId));
    if (!dropped.length) return 0;
    this.o.dropped(reason, dropped.length);
    for (const a of dropped) {
      // a recovery item gets its outcome, so that its recovery still comes to an end (as targets() does)
      const r = a.state.ev.route.recovery;
      if (r)
        this.o.outcomes.record({
          webhook_id: r.webhook,
          org_id: a.sub.org,
          event_id: r.event_id,
          type: a.state.ev.route.type,
          ok: false,
          status: null,
          error: DROPPED_ERROR[reason],
          duration_ms: 0,
          at: this.o.clock.now(),
          recovery_id: r.id,
        });
      a.state.done.push(a.sub.id);
      if (--a.state.remaining === 0) this.settle(a.state);
    }
    this.unpark(dropped[0].sub.org); // one webhook's attempts: one org's
    this.pump();
    this.notify();
    return dropped.length;
  }

  private notify(): void {
    if (this.slots.inFlight === 0 && this.idle.length) {
      const idle = this.idle;
      this.idle = [];
      for (const f of idle) f();
    }
    if (!this.freeListeners.length || this.room() === 0) return;
    const fns = this.freeListeners;
    this.freeListeners = [];
    for (const f of fns) f();
  }

  /** Record the progress of events unfinished for a while (all of them when `all`). */
  private async saveProgress(all: boolean): Promise<void> {
    if (!this.o.progress) return;
    const now = this.o.clock.now();
    const batch: Array<{ event: InboundEvent; done: readonly string[] }> = [];
    const before = new Map<EventState, number>();
    for (const s of this.events.values()) {
      if (s.done.length > s.saved && (all || now - s.since >= this.o.progressAfterMs)) {
        batch.push({ event: s.ev, done: [...s.done] });
        before.set(s, s.saved);
        s.saved = s.done.length;
      }
    }
    if (!batch.length) return;
    try {
      await this.o.progress.save(batch);
    } catch (err) {
      for (const [s, saved] of before) s.saved = Math.min(s.saved, saved);
      this.o.logger.warn({ err: String(err), events: batch.length }, 'could not record delivery progress; will try again');
    }
  }

  /**
   * Stop (SIGTERM, CONTRACT 6.6): take no more events, finish the attempts in flight (the
   * deliverer bounds each by the timeout), record what each unfinished event has had, and release
   * those events to the durable queue for the next process.
   */
  async drain(): Promise<void> {
    this.stopped = true;
    // queued attempts are dropped: their events stay unfinished (remaining > 0) and are released
    this.slots.clear();
    this.lines.clear();
    this.parked.clear();
    this.parkedCount = 0;
    if (this.slots.inFlight > 0) await new Promise<void>((r) => this.idle.push(r));
    this.progressTimer?.cancel();
    await this.saveProgress(true);
    for (const s of [...this.events.values()]) {
      this.unhold(s);
      s.ev.release();
    }
    this.failures.close();
    await this.o.outcomes.flush();
  }
}
