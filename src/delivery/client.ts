// Outgoing webhook attempts (spec 5, 6.1, 8; CONTRACT 6.4). One POST per call, no retry, no
// redirects; the timeout covers the whole exchange (connect, request, response) and starts when
// the attempt starts — a caller that waits for a slot calls attempt() only once it has one. At most
// 64 KiB of the answer is read. Never throws: every outcome is an AttemptResult. Signing is the
// caller's (src/delivery/signatures.ts): the headers come in ready.
import { Pool, type Dispatcher } from 'undici';
import { systemClock, within, type Clock, type Timer } from '../domain/clock.ts';
import { DeliveryAborted, DeliveryTimeout, describeError } from './attempt-errors.ts';
import { checkTarget, pinnedConnect, TargetRefusedError, type LookupAll, type ResolvedTarget } from './guard.ts';

export interface AttemptResult {
  delivered: boolean;
  status?: number;
  error?: string;
  duration_ms: number;
}

/** Called once with the result of Deliverer.send(), never from within the call itself. */
export type AttemptCallback = (r: AttemptResult) => void;

export interface DelivererOptions {
  /** Whole-exchange timeout per attempt (spec 8: 5 s). */
  timeoutMs: number;
  allowPrivateTargets: boolean;
  clock?: Clock;
  userAgent?: string;
  /**
   * Connections per origin (default: as many as attempts in flight there). The caller's slots bound
   * what is in flight; a cap here would queue attempts inside the pool with their timeout running
   * (CONTRACT 6.4: waiting for a slot is not part of it), one org's hanging attempts in front of
   * another org's at the same origin (CONTRACT 8).
   */
  connectionsPerOrigin?: number | null;
  /** An origin's pool unused for this long is closed (default 60 s). */
  poolIdleMs?: number;
  /** At most this many cached pools; the least recently used idle ones go first (default 256). */
  maxPools?: number;
  /** How long a host's checked addresses are reused before it is resolved and checked again (default 30 s). */
  targetTtlMs?: number;
  /** Name resolution for the target guard (tests). */
  lookup?: LookupAll;
}

export const CE_CONTENT_TYPE = 'application/cloudevents+json; charset=utf-8';
/** At most this much of a receiver's answer is read (and discarded). */
export const MAX_RESPONSE_BYTES = 64 * 1024;
const DEFAULT_USER_AGENT = 'svc-webhooks/0.2';

interface PoolEntry {
  key: string;
  pool: Pool;
  lastUsed: number;
  active: number;
  /** evicted: the host that cached it (CheckedHost.entry) must look it up again */
  closed: boolean;
}

/** A parsed webhook URL, cached by its text. */
interface ParsedTarget {
  url: URL;
  /** path and query, as sent in the request line */
  path: string;
  /** `protocol//host` — what the target guard's answer is cached under */
  hostKey: string;
}

/** The target guard's answer for a host, reused for targetTtlMs. */
interface CheckedHost {
  at: number;
  resolved?: ResolvedTarget;
  refused?: unknown;
  /** the pool for these checked addresses, found once per answer instead of once per attempt */
  entry?: PoolEntry;
}

/**
 * The attempts started in one millisecond of the clock share one timer: they all time out at the
 * same instant, timeoutMs after they started (CONTRACT 6.4), and under load a timer per group costs
 * a fraction of a timer per attempt. An attempt leaves its group as soon as it is over (so a
 * hanging attempt keeps no finished one, nor its event's body, alive), and the timer is cancelled
 * once the group is empty.
 */
interface TimeoutGroup {
  startedAt: number;
  /** the attempts of the group not yet over (each knows its index: Attempt.slot) */
  attempts: Attempt[];
  timer: Timer | null;
}

const MAX_CACHED_TARGETS = 10_000;

export class Deliverer {
  private readonly timeoutMs: number;
  private readonly allowPrivate: boolean;
  private readonly clock: Clock;
  private readonly userAgent: string;
  private readonly connections: number | null;
  private readonly poolIdleMs: number;
  private readonly maxPools: number;
  private readonly targetTtlMs: number;
  private readonly lookupAll?: LookupAll;
  private readonly pools = new Map<string, PoolEntry>();
  private readonly targets = new Map<string, ParsedTarget>();
  private readonly hosts = new Map<string, CheckedHost>();
  /** Attempts started and not yet over (aborted by close()). */
  private readonly attempts = new Set<Attempt>();
  private idleWaiters: Array<() => void> = [];
  /** the group the attempts starting now join (TimeoutGroup) */
  private timeoutGroup: TimeoutGroup | null = null;
  private sweeper: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(opts: DelivererOptions) {
    this.timeoutMs = opts.timeoutMs > 0 ? opts.timeoutMs : 5000;
    this.allowPrivate = opts.allowPrivateTargets;
    this.clock = opts.clock ?? systemClock;
    this.userAgent = opts.userAgent ?? DEFAULT_USER_AGENT;
    this.connections = opts.connectionsPerOrigin ?? null;
    this.poolIdleMs = opts.poolIdleMs ?? 60_000;
    this.maxPools = opts.maxPools ?? 256;
    this.targetTtlMs = opts.targetTtlMs ?? 30_000;
    this.lookupAll = opts.lookup;
  }

  /** Attempts started and not yet finished. */
  inFlight(): number {
    return this.attempts.size;
  }

  /** The host (and port) of a URL, for logs: never the path or query, which may carry credentials. */
  hostOf(url: string): string {
    try {
      return this.parse(url).url.host;
    } catch {
      return '?';
    }
  }

  /** POST body to url once, with these extra headers (signatures, ids). Never throws. */
  attempt(url: string, headers: Record<string, string>, body: Buffer): Promise<AttemptResult> {
    return new Promise((resolve) => this.send(url, headers, body, resolve));
  }

  /**
   * attempt() without a promise, for the data plane's hot path: done gets the result once, always
   * after send() has returned (a caller may start the next attempt from it without recursing).
   */
  send(url: string, headers: Record<string, string>, body: Buffer, done: AttemptCallback): void {
    const a = new Attempt(this, this.timeoutMs, performance.now(), done);
    this.attempts.add(a);
    const now = this.joinTimeout(a);
    if (this.closed) return a.failSoon(new DeliveryAborted('deliverer closed'));
    let t: ParsedTarget;
    try {
      t = this.parse(url);
    } catch {
      return a.failSoon(new DeliveryAborted('invalid url'));
    }
    let host: CheckedHost | undefined;
    try {
      host = this.checked(t, now);
    } catch (refusal) {
      return a.failSoon(refusal);
    }
    const list = this.headerList(headers);
    if (host) return this.post(a, t, host, list, body);
    // not checked lately: resolve and check first; the attempt's timeout runs meanwhile
    this.check(t, now).then(
      (checked) => {
        if (!a.ended) this.post(a, t, checked, list, body);
      },
      (err: unknown) => a.fail(err),
    );
  }

  /**
   * Stop taking attempts, wait for the ones in flight (at most graceMs, default the timeout),
   * abort what is left, then close every pool.
   */
  async close(graceMs: number = this.timeoutMs): Promise<void> {
    this.closed = true;
    if (this.attempts.size && graceMs > 0) await within(this.clock, this.idle(), graceMs);
    const reason = new DeliveryAborted('aborted: shutting down');
    for (const a of [...this.attempts]) a.abort(reason);
    await this.idle();
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.allSettled(pools.map((e) => e.pool.destroy()));
  }

  // ---------------------------------------------------------------- internals

  /** Resolves once no attempt is in flight. */
  private idle(): Promise<void> {
    if (!this.attempts.size) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** The attempt is over (called once, by Attempt only): free what it held. */
  ended(a: Attempt): void {
    this.attempts.delete(a);
    const g = a.timeout;
    if (g) {
      // out of the group in O(1): the last one takes its place
      const last = g.attempts.pop() as Attempt;
      if (last !== a) {
        g.attempts[a.slot] = last;
        last.slot = a.slot;
      }
      if (g.attempts.length === 0) {
        g.timer?.cancel();
        if (this.timeoutGroup === g) this.timeoutGroup = null;
      }
    }
    // idle since when matters only once nothing uses the pool (evict)
    const entry = a.entry;
    if (entry && --entry.active === 0) entry.lastUsed = this.clock.now();
    if (this.attempts.size === 0 && this.idleWaiters.length) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  /** Into the timeout group of this millisecond; returns the clock's now. */
  private joinTimeout(a: Attempt): number {
    const now = this.clock.now();
    let g = this.timeoutGroup;
    if (!g || g.startedAt !== now) {
      const group: TimeoutGroup = { startedAt: now, attempts: [], timer: null };
      group.timer = this.clock.setTimeout(() => this.expire(group), this.timeoutMs);
      this.timeoutGroup = g = group;
    }
    a.slot = g.attempts.length;
    g.attempts.push(a);
    a.timeout = g;
    return now;
  }

  private expire(g: TimeoutGroup): void {
    if (this.timeoutGroup === g) this.timeoutGroup = null;
    const timeout = new DeliveryTimeout(this.timeoutMs);
    // each abort takes its attempt out of the group: go over a copy
    for (const a of g.attempts.slice()) a.abort(timeout);
  }

  /** undici's flat header list: ours, then the caller's (signatures, ids). */
  private headerList(extra: Record<string, string>): string[] {
    const list = ['content-type', CE_CONTENT_TYPE, 'user-agent', this.userAgent];
    for (const name in extra) list.push(name, extra[name]);
    return list;
  }

  private post(a: Attempt, t: ParsedTarget, host: CheckedHost, headers: string[], body: Buffer): void {
    try {
      let entry = host.entry;
      if (!entry || entry.closed) host.entry = entry = this.acquirePool(t.url, host.resolved as ResolvedTarget);
      entry.active++;
      a.entry = entry;
      entry.pool.dispatch(
        {
          method: 'POST',
          path: t.path,
          headers,
          body,
          // the attempt's own timer is authoritative; these only stop undici from waiting longer
          headersTimeout: this.timeoutMs + 1000,
          bodyTimeout: this.timeoutMs + 1000,
        },
        a,
      );
    } catch (err) {
      a.fail(err);
    }
  }

  private parse(text: string): ParsedTarget {
    let t = this.targets.get(text);
    if (!t) {
      const url = new URL(text);
      t = { url, path: `${url.pathname || '/'}${url.search}`, hostKey: `${url.protocol}//${url.host}` };
      if (this.targets.size >= MAX_CACHED_TARGETS) this.targets.clear();
      this.targets.set(text, t);
    }
    return t;
  }

  /** The guard's cached answer for this host while fresh (throws a cached refusal); undefined when it must be checked. */
  private checked(t: ParsedTarget, now: number): CheckedHost | undefined {
    const hit = this.hosts.get(t.hostKey);
    if (!hit || now - hit.at >= this.targetTtlMs) return undefined;
    if (hit.resolved) return hit;
    throw hit.refused;
  }

  /** Resolve and check the host (when checked() had no fresh answer), and remember the answer. */
  private async check(t: ParsedTarget, now: number): Promise<CheckedHost> {
    try {
      const resolved = await checkTarget(t.url, { allowPrivate: this.allowPrivate, lookup: this.lookupAll });
      const host: CheckedHost = { at: now, resolved };
      this.remember(t.hostKey, host);
      return host;
    } catch (err) {
      // a refusal stands for the TTL; a failed lookup is tried again next time
      if (err instanceof TargetRefusedError) this.remember(t.hostKey, { at: now, refused: err });
      throw err;
    }
  }

  private remember(key: string, c: CheckedHost): void {
    if (this.hosts.size >= MAX_CACHED_TARGETS) this.hosts.clear();
    this.hosts.set(key, c);
  }

  /**
   * The keep-alive pool for this origin and vetted addresses (connecting to nothing else); the
   * caller marks it in use.
   */
  private acquirePool(url: URL, resolved: ResolvedTarget): PoolEntry {
    const key = `${url.origin}|${resolved.addresses.map((a) => a.address).join(',')}`;
    const now = this.clock.now();
    let entry = this.pools.get(key);
    if (entry) {
      entry.lastUsed = now;
      return entry;
    }
    const pool = new Pool(url.origin, {
      connections: this.connections,
      keepAliveTimeout: 10_000,
      keepAliveMaxTimeout: 60_000,
      connect: pinnedConnect(url, resolved, this.timeoutMs),
    });
    entry = { key, pool, lastUsed: now, active: 0, closed: false };
    this.pools.set(key, entry);
    this.evict(now);
    if (!this.sweeper) {
      this.sweeper = setInterval(() => this.evict(this.clock.now()), Math.min(30_000, Math.max(1000, this.poolIdleMs / 2)));
      this.sweeper.unref();
    }
    return entry;
  }

  /** Close pools idle for poolIdleMs, and the least recently used idle ones above maxPools. */
  private evict(now: number): void {
    let excess = this.pools.size - this.maxPools;
    const idle = [...this.pools.values()].filter((e) => e.active === 0).sort((a, b) => a.lastUsed - b.lastUsed);
    for (const e of idle) {
      if (excess > 0 || now - e.lastUsed >= this.poolIdleMs) {
        this.pools.delete(e.key);
        e.closed = true;
        excess--;
        e.pool.close().catch(() => e.pool.destroy().catch(() => {}));
      }
    }
    if (this.pools.size === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }
}

/** The response is larger than we read: cut, and judged by its status. */
class ResponseTooLong extends Error {
  override readonly name = 'ResponseTooLong';
}

/**
 * Attempts whose answer has ended, waiting for undici to hand their connection back to the pool:
 * it does shortly after onResponseEnd (measured: after two turns of the event loop), and
 * settling them then lets the next attempt at that origin reuse the connection instead of opening
 * another. Two stages, each moved on by one setImmediate for all of them instead of two per attempt.
 */
let endedNow: Attempt[] = [];
let endedBefore: Attempt[] = [];
let endTurns = false;

function settleEnded(): void {
  const ready = endedBefore;
  endedBefore = endedNow;
  endedNow = [];
  for (const a of ready) a.settle(null);
  if (endedBefore.length || endedNow.length) setImmediate(settleEnded);
  else endTurns = false;
}

function settleAfterTwoTurns(a: Attempt): void {
  endedNow.push(a);
  if (!endTurns) {
    endTurns = true;
    setImmediate(settleEnded);
  }
}

/**
 * One POST on undici's dispatch API: no AbortController, no body stream, no promise. The timeout
 * (the deliverer's TimeoutGroup) covers the whole exchange from the start of the attempt
 * (connecting included); at most MAX_RESPONSE_BYTES of the answer are read (past that the
 * connection is dropped and the status decides).
 */
class Attempt implements Dispatcher.DispatchHandler {
  status: number | undefined;
  ended = false;
  timeout: TimeoutGroup | null = null;
  /** its index in timeout.attempts */
  slot = 0;
  entry: PoolEntry | null = null;
  private controller: Dispatcher.DispatchController | null = null;
  private failure: Error | null = null;
  private bytes = 0;

  /** the caller's callback, until the result is given (then null: see settle) */
  private done: AttemptCallback | null;

  constructor(
    private readonly deliverer: Deliverer,
    private readonly timeoutMs: number,
    private readonly started: number,
    done: AttemptCallback,
  ) {
    this.done = done;
  }

  /** Fail before anything was sent: the result comes after send() returned. */
  failSoon(err: unknown): void {
    queueMicrotask(() => this.fail(err));
  }

  fail(err: unknown): void {
    this.settle(err instanceof Error ? err : new Error(String(err)));
  }

  /** The timeout, or close(): stop the exchange; it has failed unless it had already ended. */
  abort(err: Error): void {
    if (this.ended) return;
    this.failure ??= err;
    this.controller?.abort(err);
    this.settle(err);
  }

  /** The attempt is over: its result, once. err null = the answer ended (the status decides). */
  settle(err: Error | null): void {
    if (this.ended) return;
    this.ended = true;
    this.deliverer.ended(this);
    const status = this.status;
    const duration_ms = Math.max(0, Math.round(performance.now() - this.started));
    // no undefined keys: the result is serialised as is (ping endpoint)
    let r: AttemptResult;
    if (status !== undefined && (err === null || err instanceof ResponseTooLong)) {
      r = status >= 200 && status < 300 ? { delivered: true, status, duration_ms } : { delivered: false, status, error: `HTTP ${status}`, duration_ms };
    } else {
      const error = describeError(err ?? new DeliveryAborted('no response'), this.timeoutMs);
      r = status !== undefined ? { delivered: false, status, error, duration_ms } : { delivered: false, error, duration_ms };
    }
    const done = this.done as AttemptCallback;
    // Over: the attempt lets go of what it points to. undici may still hold a finished attempt (its
    // handler) for a while, and an attempt that V8 has moved to the old generation is only found dead
    // at a full collection; until then every young object it points to (the callback, and through
    // it the pipeline's grant, its event, undici's request) outlives each scavenge and is promoted
    // with it. Measured at x100 (BENCHMARKS.md, issue 33 step 9): 2.6 MB survived each scavenge of
    // the delivery thread and 2.0 MB were promoted; with these released, 0.9–1.8 and 0.4–1.2.
    this.done = null;
    this.controller = null;
    this.timeout = null;
    this.entry = null;
    done(r);
  }

  // ---- undici's DispatchHandler
  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.failure) controller.abort(this.failure);
  }

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number): void {
    this.status = statusCode;
  }

  onResponseData(c: Dispatcher.DispatchController, chunk: Buffer): void {
    this.bytes += chunk.length;
    if (this.bytes > MAX_RESPONSE_BYTES) {
      const cut = new ResponseTooLong('response over the limit');
      c.abort(cut);
      this.settle(cut);
    }
  }

  onResponseEnd(): void {
    settleAfterTwoTurns(this);
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    this.settle(this.failure ?? err);
  }
}
