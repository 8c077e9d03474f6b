// The delivery slots of one data plane, and of the pings and resends (CONTRACT 6.6, 8), shared
// fairly: attempts queue per webhook, webhooks per org, and a free slot goes round robin over the
// orgs with startable work first and over that org's webhooks second. As in Kubernetes API
// Priority and Fairness, a slot is a seat held for as long as its attempt runs: what decides who
// may take one is what each org and webhook holds now (attempts in flight, and whether any of them
// has been running longer than fastMs: "hanging"), not only how its webhooks answered before. A
// slot cannot be taken back, and a receiver that answered fast may hang on its next attempt, so
// the last free slots are kept for those that cannot be held long:
//
//   - global: at most `concurrency` attempts in flight; per webhook at most `perWebhook` (8)
//   - share:  while another org waits for a slot, an org holding max(minShare, concurrency /
//             competing orgs) or more starts nothing (it may use the slots when alone)
//   - floor:  the last `floor` free slots (min(minShare, reserve)) go only to an org holding fewer
//             than minShare: however an org's receivers turn (fast, then hanging), another org
//             that shows up finds a slot at once. An org holding fewer than minShare takes any
//             free slot for any of its webhooks.
//   - room:   an org holding minShare or more has room for what is left of its share while
//             another org waits, else of concurrency - floor. Within it, the last `reserve`
//             go only to webhooks "young": known fast (their last attempt delivered within
//             fastMs) and none of whose attempts in flight is older than fastMs; of those, the
//             last `floor` only to young webhooks holding nothing in flight. So a webhook that
//             hangs, or a new one, cannot take the org's last slots from its other webhooks
//             either: they are served within a fast attempt's time (CONTRACT 8, within one org).
//   - breaker: a webhook whose last tripAfter attempts all failed (or timed out) gets 1 attempt
//             in flight (half-open) until one is delivered
//
// Pressure (what the pipeline weighs before fanning out more events of an org) counts the backlog
// expected to drain soon: at most `parked` queued attempts of each webhook young or not yet tried
// (no outcome yet: a new webhook is taken to be fast until it shows otherwise), none of the slow,
// hanging or failing ones; it is kept per org, so one org's backlog parks that org's events only
// (src/dataplane/pipeline.ts). Queued attempts are counted per org too; the attempts
// queued for a deleted webhook can be taken out (drop).
//
// Every decision is O(1) amortised in the number of webhooks and attempts: rings of ready orgs and
// of each org's ready webhooks by kind (young and idle, young, other), entries checked lazily when
// taken and moved to the ring of their kind when it changed; attempts in flight in one queue in
// the order they started, each marked hanging once (when it is found older than fastMs at the
// front) and skipped there once done. What is remembered about a webhook between its bursts
// (fast, failures in a row) is kept for at most maxTracked webhooks, the oldest forgotten first.
import type { Clock } from '../domain/clock.ts';
import { Fifo } from '../domain/fifo.ts';

export interface SlotOptions {
  clock: Clock;
  /** attempts in flight at most, all orgs together (--delivery-concurrency) */
  concurrency: number;
  /** attempts in flight at most per webhook (CONTRACT 6.6: 8) */
  perWebhook: number;
  /** free slots kept for fast webhooks and small orgs (default concurrency / 8, at least 1) */
  reserve?: number;
  /** slots an org always gets when it competes (default concurrency / 32, at least 1) */
  minShare?: number;
  /** failed attempts in a row that leave a webhook 1 attempt in flight (default 3) */
  tripAfter?: number;
  /** an attempt delivered within this long makes its webhook fast (default 1000 ms: the tenancy bound) */
  fastMs?: number;
  /** webhooks whose health is remembered (default 50 000) */
  maxTracked?: number;
  /** queued attempts of one fast (or untried) webhook that count as pressure at most (default 32) */
  parked?: number;
}

/** A started attempt: hand it back to done() when it has an outcome. */
export interface Grant<T> {
  readonly item: T;
  readonly org: string;
  readonly webhook: string;
}

interface Health {
  /** failed attempts in a row */
  fails: number;
  /** the last attempt was delivered within fastMs */
  fast: boolean;
  /** no attempt has had an outcome yet (a new webhook, or one forgotten) */
  untried: boolean;
}

interface OrgState {
  id: string;
  inFlight: number;
  queued: number;
  /** what its webhooks' queues add to the pressure */
  weight: number;
  /** ready webhooks by kind (see Kind) */
  idle: Fifo<HookState>;
  young: Fifo<HookState>;
  other: Fifo<HookState>;
  /** when any webhook may be taken: the other ones go first next time (young and other ones take turns) */
  otherTurn: boolean;
  inRing: boolean;
}

interface HookState {
  id: string;
  org: OrgState;
  inFlight: number;
  /** attempts in flight older than fastMs */
  hanging: number;
  queue: Fifo<unknown>;
  health: Health;
  /** what its queue adds to the pressure now */
  counted: number;
  /** the org ring it is live in (an entry left behind in another ring when its kind changed is skipped) */
  ring: Kind | null;
}

/**
 * What a ready webhook is now: `idle` young and holding nothing in flight, `young` known fast with
 * no attempt in flight older than fastMs, `other` the rest (new, slow, failing, hanging now).
 */
type Kind = 'idle' | 'young' | 'other';
/** the rings an org's webhooks are taken from, by how much room the org has left (see the header) */
const IDLE_ONLY: readonly Kind[] = ['idle'];
const YOUNG_ONLY: readonly Kind[] = ['idle', 'young'];
const YOUNG_FIRST: readonly Kind[] = ['idle', 'young', 'other'];
const OTHER_FIRST: readonly Kind[] = ['other', 'idle', 'young'];

interface GrantState<T> extends Grant<T> {
  hook: HookState;
  startedAt: number;
  /** counted in its webhook's hanging (found older than fastMs) */
  hanging: boolean;
  /** done() was called (it may still wait in the queue of young attempts, to be skipped) */
  ended: boolean;
}

export class FairSlots<T> {
  private readonly clock: Clock;
  private readonly concurrency: number;
  private readonly perWebhook: number;
  private readonly reserve: number;
  private readonly minShare: number;
  private readonly floor: number;
  private readonly tripAfter: number;
  private readonly fastMs: number;
  private readonly maxTracked: number;
  private readonly parked: number;
  private readonly orgs = new Map<string, OrgState>();
  private readonly hooks = new Map<string, HookState>();
  private readonly health = new Map<string, Health>();
  /** orgs with a ready webhook (checked lazily) */
  private readonly ready = new Fifo<OrgState>();
  /** attempts in flight not yet found hanging, in the order they started (ended ones skipped) */
  private readonly started = new Fifo<GrantState<T>>();
  private readyOrgs = 0;
  private running = 0;
  private hangingNow = 0;
  private waiting = 0;
  private weight = 0;

  constructor(o: SlotOptions) {
    this.clock = o.clock;
    this.concurrency = Math.max(1, o.concurrency);
    this.perWebhook = Math.max(1, o.perWebhook);
    this.reserve = o.reserve ?? Math.max(1, Math.floor(this.concurrency / 8));
    this.minShare = o.minShare ?? Math.max(1, Math.floor(this.concurrency / 32));
    this.floor = Math.min(this.minShare, this.reserve);
    this.tripAfter = o.tripAfter ?? 3;
    this.fastMs = o.fastMs ?? 1000;
    this.maxTracked = o.maxTracked ?? 50_000;
    this.parked = o.parked ?? 32;
  }

  /** Attempts in flight. */
  get inFlight(): number {
    return this.running;
  }

  /** Attempts in flight for longer than fastMs (as of the last decision). */
  get hanging(): number {
    return this.hangingNow;
  }

  /** Attempts queued, not started. */
  get queued(): number {
    return this.waiting;
  }

  /** Queued attempts expected to drain soon: at most `parked` per webhook young or not yet tried, none of the others. */
  get pressure(): number {
    this.age();
    return this.weight;
  }

  /** Attempts of an org queued, not started. */
  queuedOf(org: string): number {
    return this.orgs.get(org)?.queued ?? 0;
  }

  /** An org's part of the pressure (the backlog of its young and untried webhooks). */
  pressureOf(org: string): number {
    this.age();
    return this.orgs.get(org)?.weight ?? 0;
  }

  /**
   * Take every queued attempt of a webhook out (it was deleted or disabled): they are returned, not
   * started; its attempts in flight keep their slots until done().
   */
  drop(webhook: string): T[] {
    const h = this.hooks.get(webhook);
    if (!h || h.queue.size === 0) return [];
    const items: T[] = [];
    for (let x = h.queue.shift(); x !== undefined; x = h.queue.shift()) items.push(x as T);
    const o = h.org;
    o.queued -= items.length;
    this.waiting -= items.length;
    this.weigh(h);
    // its ring entries are skipped when taken (no longer ready)
    if (h.inFlight === 0) this.hooks.delete(h.id);
    if (o.queued === 0 && o.inFlight === 0) this.orgs.delete(o.id);
    return items;
  }

  /** Attempts the webhook may have in flight now: perWebhook, or 1 while its breaker is open. */
  limitOf(webhook: string): number {
    const h = this.hooks.get(webhook)?.health ?? this.health.get(webhook);
    return h && h.fails >= this.tripAfter ? 1 : this.perWebhook;
  }

  /** Queue an attempt. */
  push(org: string, webhook: string, item: T): void {
    let o = this.orgs.get(org);
    if (!o)
      this.orgs.set(
        org,
        (o = {
          id: org,
          inFlight: 0,
          queued: 0,
          weight: 0,
          idle: new Fifo(),
          young: new Fifo(),
          other: new Fifo(),
          otherTurn: false,
          inRing: false,
        }),
      );
    let h = this.hooks.get(webhook);
    if (!h)
      this.hooks.set(
        webhook,
        (h = { id: webhook, org: o, inFlight: 0, hanging: 0, queue: new Fifo(), health: this.healthOf(webhook), counted: 0, ring: null }),
      );
    h.queue.push(item);
    o.queued++;
    this.waiting++;
    this.weigh(h);
    this.markReady(h);
  }

  /** The next attempt to start now, or null when no slot may be taken. */
  next(): Grant<T> | null {
    this.age();
    for (let n = this.readyOrgs; n > 0 && this.running < this.concurrency; n--) {
      const o = this.ready.shift();
      if (!o) break;
      o.inRing = false;
      this.readyOrgs--;
      const rings = this.ringsFor(o);
      if (!rings) {
        // no room for it now (over its share while another org waits, or at the floor): its turn comes again after the others'
        this.requeueOrg(o);
        continue;
      }
      const h = this.pick(o, rings);
      if (!h) {
        if (this.hasReady(o)) this.requeueOrg(o);
        // it had nothing ready after all: one org fewer waits, so look at the others again (shares grew)
        else n = this.readyOrgs + 1;
        continue;
      }
      const item = h.queue.shift() as T;
      o.queued--;
      this.waiting--;
      h.inFlight++;
      o.inFlight++;
      this.running++;
      this.weigh(h);
      this.ringHook(h);
      if (this.hasReady(o)) this.requeueOrg(o);
      const g: GrantState<T> = { item, org: o.id, webhook: h.id, hook: h, startedAt: this.clock.now(), hanging: false, ended: false };
      this.started.push(g);
      return g;
    }
    return null;
  }

  /** The attempt of g has an outcome: free its slot and note how the webhook did. */
  done(g: Grant<T>, delivered: boolean): void {
    const gs = g as GrantState<T>;
    const { hook: h, startedAt } = gs;
    const o = h.org;
    h.inFlight--;
    o.inFlight--;
    this.running--;
    gs.ended = true;
    if (gs.hanging) {
      h.hanging--;
      this.hangingNow--;
    }
    const health = h.health;
    const before = health.fails === 0 && health.fast;
    health.untried = false;
    if (delivered) {
      health.fails = 0;
      health.fast = this.clock.now() - startedAt <= this.fastMs;
    } else {
      health.fails++;
      health.fast = false;
    }
    // a fast webhook that stays fast (the common case) is not moved to the recent end each time
    if (!before || !health.fast || !this.health.has(h.id)) this.remember(h.id, health);
    this.weigh(h);
    if (h.queue.size === 0 && h.inFlight === 0) this.hooks.delete(h.id);
    else this.markReady(h);
    if (o.queued === 0 && o.inFlight === 0) this.orgs.delete(o.id);
  }

  /** Drop every queued attempt (drain); attempts in flight keep their slots until done(). */
  clear(): void {
    for (const h of this.hooks.values()) {
      h.queue.clear();
      h.ring = null;
      h.counted = 0;
      if (h.inFlight === 0) this.hooks.delete(h.id);
    }
    for (const o of this.orgs.values()) {
      o.queued = 0;
      o.weight = 0;
      o.idle.clear();
      o.young.clear();
      o.other.clear();
      o.inRing = false;
      if (o.inFlight === 0) this.orgs.delete(o.id);
    }
    this.ready.clear();
    this.readyOrgs = 0;
    this.waiting = 0;
    this.weight = 0;
  }

  /**
   * Which of the org's rings it may start an attempt from now (null: none). An org holding fewer
   * than minShare: any. Else none while `floor` or fewer slots are free; and by its room, what is
   * left of its share while another org waits, or of concurrency - floor when none does: its last
   * `reserve` for young webhooks only, the last `floor` of those for young webhooks holding nothing.
   */
  private ringsFor(o: OrgState): readonly Kind[] | null {
    const any = o.otherTurn ? OTHER_FIRST : YOUNG_FIRST;
    if (o.inFlight < this.minShare) return any;
    if (this.concurrency - this.running <= this.floor) return null;
    const cap =
      this.readyOrgs > 0 ? Math.max(this.minShare, Math.floor(this.concurrency / (this.readyOrgs + 1))) : this.concurrency - this.floor;
    const room = cap - o.inFlight;
    return room > this.reserve ? any : room > this.floor ? YOUNG_ONLY : room > 0 ? IDLE_ONLY : null;
  }

  /** Mark the attempts in flight that have grown older than fastMs as hanging (their webhooks are young no more). */
  private age(): void {
    const since = this.clock.now() - this.fastMs;
    for (let g = this.started.peek(); g && (g.ended || g.startedAt < since); g = this.started.peek()) {
      this.started.shift();
      if (g.ended) continue;
      g.hanging = true;
      this.hangingNow++;
      const h = g.hook;
      if (h.hanging++ === 0) {
        this.weigh(h);
        this.ringHook(h);
      }
    }
  }

  private isYoung(h: HookState): boolean {
    return h.health.fast && h.hanging === 0;
  }

  private kindOf(h: HookState): Kind {
    return !this.isYoung(h) ? 'other' : h.inFlight === 0 ? 'idle' : 'young';
  }

  private weigh(h: HookState): void {
    const c = this.isYoung(h) || h.health.untried ? Math.min(h.queue.size, this.parked) : 0;
    this.weight += c - h.counted;
    h.org.weight += c - h.counted;
    h.counted = c;
  }

  private isReady(h: HookState): boolean {
    return h.queue.size > 0 && h.inFlight < (h.health.fails >= this.tripAfter ? 1 : this.perWebhook);
  }

  private hasReady(o: OrgState): boolean {
    return o.idle.size + o.young.size + o.other.size > 0;
  }

  /** Into its org's ring of its kind, if it is ready and not there yet (or there under another kind). */
  private ringHook(h: HookState): void {
    const kind = this.kindOf(h);
    if (h.ring !== kind && this.isReady(h)) {
      h.ring = kind;
      h.org[kind].push(h);
    }
  }

  /** Its org's ring, and the org into the ring of orgs, once ready. */
  private markReady(h: HookState): void {
    this.ringHook(h);
    const o = h.org;
    if (!o.inRing && this.hasReady(o)) this.requeueOrg(o);
  }

  private requeueOrg(o: OrgState): void {
    o.inRing = true;
    this.readyOrgs++;
    this.ready.push(o);
  }

  /**
   * The next ready webhook of the org from these rings, in this order (when they may all be taken,
   * young webhooks, idle ones first, and other ones take turns). Entries that stopped being ready are dropped on the way;
   * one found under a kind it no longer is goes to the ring of its kind.
   */
  private pick(o: OrgState, rings: readonly Kind[]): HookState | null {
    for (const kind of rings) {
      const ring = o[kind];
      for (let n = ring.size; n > 0; n--) {
        const h = ring.shift() as HookState;
        if (h.ring !== kind) continue; // left behind when it changed kind
        h.ring = null;
        if (!this.isReady(h)) continue;
        if (this.kindOf(h) !== kind) {
          this.ringHook(h);
          continue;
        }
        if (rings.length === YOUNG_FIRST.length) o.otherTurn = kind !== 'other';
        return h;
      }
    }
    return null;
  }

  private healthOf(webhook: string): Health {
    return this.health.get(webhook) ?? { fails: 0, fast: false, untried: true };
  }

  /** Keep what is known of a webhook, most recent last; forget the oldest beyond maxTracked. */
  private remember(webhook: string, h: Health): void {
    this.health.delete(webhook);
    this.health.set(webhook, h);
    if (this.health.size > this.maxTracked) {
      const oldest = this.health.keys().next().value;
      if (oldest !== undefined) this.health.delete(oldest);
    }
  }
}
