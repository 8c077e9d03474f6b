// The delivery slots of one data plane, shared fairly (CONTRACT 6.6, 8): attempts queue per
// webhook, webhooks per org, and a free slot goes round robin over the orgs with startable work
// first and over that org's webhooks second. Four rules bound what one org's slow or dead
// receivers cost the others:
//
//   - global: at most `concurrency` attempts in flight; per webhook at most `perWebhook` (8)
//   - share:  while another org waits for a slot, an org holding max(minShare, concurrency /
//             competing orgs) or more starts nothing (it may use every slot when alone)
//   - reserve: the last `reserve` free slots go only to webhooks known to answer fast (their last
//             attempt delivered within fastMs) or to an org holding fewer than minShare: an org
//             whose receivers hang cannot fill every slot before another org shows up, since
//             nothing frees a hanging slot before the delivery timeout
//   - breaker: a webhook whose last tripAfter attempts all failed (or timed out) gets 1 attempt
//             in flight (half-open) until one is delivered
//
// Pressure (what the pipeline weighs before fanning out more events of an org) counts the backlog
// expected to drain soon: at most `parked` queued attempts of each webhook known fast or not yet
// tried (no outcome yet: a new webhook is taken to be fast until it shows otherwise), none of the
// slow or failing ones; it is kept per org, so one org's backlog parks that org's events only
// (src/dataplane/pipeline.ts). Queued attempts are counted per org too; the attempts
// queued for a deleted webhook can be taken out (drop).
//
// Every decision is O(1) amortised in the number of webhooks: rings of ready orgs and ready
// webhooks, entries checked lazily when taken. What is remembered about a webhook between its
// bursts (fast, failures in a row) is kept for at most maxTracked webhooks, the oldest forgotten
// first.
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
  /** ready webhooks known fast, and the others (new, slow, failing) */
  fast: Fifo<HookState>;
  slow: Fifo<HookState>;
  /** which ring goes first next time (webhooks of both kinds take turns) */
  slowTurn: boolean;
  inRing: boolean;
}

interface HookState {
  id: string;
  org: OrgState;
  inFlight: number;
  queue: Fifo<unknown>;
  health: Health;
  /** what its queue adds to the pressure now */
  counted: number;
  /** the org ring it is live in (an entry left behind in the other ring when its kind changed is skipped) */
  ring: Kind | null;
}

type Kind = 'fast' | 'slow';
const FAST_ONLY: readonly Kind[] = ['fast'];
const FAST_FIRST: readonly Kind[] = ['fast', 'slow'];
const SLOW_FIRST: readonly Kind[] = ['slow', 'fast'];

interface GrantState<T> extends Grant<T> {
  hook: HookState;
  startedAt: number;
}

export class FairSlots<T> {
  private readonly clock: Clock;
  private readonly concurrency: number;
  private readonly perWebhook: number;
  private readonly reserve: number;
  private readonly minShare: number;
  private readonly tripAfter: number;
  private readonly fastMs: number;
  private readonly maxTracked: number;
  private readonly parked: number;
  private readonly orgs = new Map<string, OrgState>();
  private readonly hooks = new Map<string, HookState>();
  private readonly health = new Map<string, Health>();
  /** orgs with a ready webhook (checked lazily) */
  private readonly ready = new Fifo<OrgState>();
  private readyOrgs = 0;
  private running = 0;
  private waiting = 0;
  private weight = 0;

  constructor(o: SlotOptions) {
    this.clock = o.clock;
    this.concurrency = Math.max(1, o.concurrency);
    this.perWebhook = Math.max(1, o.perWebhook);
    this.reserve = o.reserve ?? Math.max(1, Math.floor(this.concurrency / 8));
    this.minShare = o.minShare ?? Math.max(1, Math.floor(this.concurrency / 32));
    this.tripAfter = o.tripAfter ?? 3;
    this.fastMs = o.fastMs ?? 1000;
    this.maxTracked = o.maxTracked ?? 50_000;
    this.parked = o.parked ?? 32;
  }

  /** Attempts in flight. */
  get inFlight(): number {
    return this.running;
  }

  /** Attempts queued, not started. */
  get queued(): number {
    return this.waiting;
  }

  /** Queued attempts expected to drain soon: at most `parked` per webhook known fast or not yet tried, none of the others. */
  get pressure(): number {
    return this.weight;
  }

  /** Attempts of an org queued, not started. */
  queuedOf(org: string): number {
    return this.orgs.get(org)?.queued ?? 0;
  }

  /** An org's part of the pressure (the backlog of its fast and untried webhooks). */
  pressureOf(org: string): number {
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
    if (!o) this.orgs.set(org, (o = { id: org, inFlight: 0, queued: 0, weight: 0, fast: new Fifo(), slow: new Fifo(), slowTurn: false, inRing: false }));
    let h = this.hooks.get(webhook);
    if (!h) this.hooks.set(webhook, (h = { id: webhook, org: o, inFlight: 0, queue: new Fifo(), health: this.healthOf(webhook), counted: 0, ring: null }));
    h.queue.push(item);
    o.queued++;
    this.waiting++;
    this.weigh(h);
    this.markReady(h);
  }

  /** The next attempt to start now, or null when no slot may be taken. */
  next(): Grant<T> | null {
    for (let n = this.readyOrgs; n > 0 && this.running < this.concurrency; n--) {
      const o = this.ready.shift();
      if (!o) break;
      o.inRing = false;
      this.readyOrgs--;
      const free = this.concurrency - this.running;
      const share = Math.max(this.minShare, Math.floor(this.concurrency / (this.readyOrgs + 1)));
      if (this.readyOrgs > 0 && o.inFlight >= share) {
        // over its share while another org waits: its turn comes again after the others'
        this.requeueOrg(o);
        continue;
      }
      const fastOnly = free <= this.reserve && o.inFlight >= this.minShare;
      const h = this.pick(o, fastOnly);
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
      const g: GrantState<T> = { item, org: o.id, webhook: h.id, hook: h, startedAt: this.clock.now() };
      return g;
    }
    return null;
  }

  /** The attempt of g has an outcome: free its slot and note how the webhook did. */
  done(g: Grant<T>, delivered: boolean): void {
    const { hook: h, startedAt } = g as GrantState<T>;
    const o = h.org;
    h.inFlight--;
    o.inFlight--;
    this.running--;
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
      o.fast.clear();
      o.slow.clear();
      o.inRing = false;
      if (o.inFlight === 0) this.orgs.delete(o.id);
    }
    this.ready.clear();
    this.readyOrgs = 0;
    this.waiting = 0;
    this.weight = 0;
  }

  private weigh(h: HookState): void {
    const c = h.health.fast || h.health.untried ? Math.min(h.queue.size, this.parked) : 0;
    this.weight += c - h.counted;
    h.org.weight += c - h.counted;
    h.counted = c;
  }

  private isReady(h: HookState): boolean {
    return h.queue.size > 0 && h.inFlight < (h.health.fails >= this.tripAfter ? 1 : this.perWebhook);
  }

  private hasReady(o: OrgState): boolean {
    return o.fast.size + o.slow.size > 0;
  }

  /** Into its org's ring of its kind, if it is ready and not there yet (or there under the other kind). */
  private ringHook(h: HookState): void {
    const kind: Kind = h.health.fast ? 'fast' : 'slow';
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
   * The next ready webhook of the org, fast and other webhooks taking turns (only fast ones when
   * fastOnly). Entries that stopped being ready are dropped on the way; one that changed kind goes
   * back to the ring of its kind when it is started (or when fastOnly turns it away).
   */
  private pick(o: OrgState, fastOnly: boolean): HookState | null {
    for (const kind of fastOnly ? FAST_ONLY : o.slowTurn ? SLOW_FIRST : FAST_FIRST) {
      const ring = o[kind];
      for (let n = ring.size; n > 0; n--) {
        const h = ring.shift() as HookState;
        if (h.ring !== kind) continue; // left behind when it changed kind
        h.ring = null;
        if (!this.isReady(h)) continue;
        if (fastOnly && !h.health.fast) {
          this.ringHook(h); // no longer fast: into the other ring
          continue;
        }
        if (!fastOnly) o.slowTurn = kind === 'fast';
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
