// Outgoing webhook attempts (spec 5, 6.1, 8; CONTRACT 6.4). One POST per call, no retry, no
// redirects; the timeout covers the whole exchange (connect, request, response) and starts when
// the attempt starts — a caller that waits for a slot calls attempt() only once it has one. At most
// 64 KiB of the answer is read. Never throws: every outcome is an AttemptResult. Signing is the
// caller's (src/delivery/signing.ts): the headers come in ready.
import { Http1Pool, type Exchange, type ExchangeHandler } from './http1.ts';
import { systemClock, within, type Clock, type Timer } from '../domain/clock.ts';
import { DeliveryAborted, DeliveryTimeout, describeError } from './attempt-errors.ts';
import { checkTarget, pinnedLookup, TargetRefusedError, type LookupAll, type ResolvedTarget } from './guard.ts';
import { BodyKeeper, exchangeRecord } from './exchange-record.ts';

/**
 * Where an AttemptResult carries what its exchange kept (src/delivery/exchange-record.ts: one JSON
 * string, CONTRACT 4.5 request/response). A symbol: a result serialised as is (ping, resend) or
 * spread into an answer does not show it.
 */
export const EXCHANGE: unique symbol = Symbol('svc.exchange');

export interface AttemptResult {
  delivered: boolean;
  status?: number;
  error?: string;
  duration_ms: number;
  /** the kept request and response, as JSON (absent when the attempt never got to send) */
  [EXCHANGE]?: string;
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
  pool: Http1Pool;
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
/** A header name (RFC 9110 token) and value (no CR, LF or other control but tab). */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

export class Deliverer {
  private readonly timeoutMs: number;
  private readonly allowPrivate: boolean;
  private readonly clock: Clock;
  private readonly userAgent: string;
  /** every request's own header lines (content type, user agent) */
  private readonly ownHeaders: string;
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
    if (!HEADER_VALUE.test(this.userAgent)) throw new Error('invalid user agent');
    this.ownHeaders = `content-type: ${CE_CONTENT_TYPE}\r\nuser-agent: ${this.userAgent}\r\n`;
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
    let lines: string;
    try {
      lines = this.headerLines(headers);
    } catch (err) {
      return a.failSoon(err);
    }
    a.sent = { host: t.url.host, lines, length: body.length };
    if (host) return this.post(a, t, host, lines, body);
    // not checked lately: resolve and check first; the attempt's timeout runs meanwhile
    this.check(t, now).then(
      (checked) => {
        if (!a.ended) this.post(a, t, checked, lines, body);
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
    for (const e of pools) e.pool.destroy();
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

  /** The request's header lines: ours, then the caller's (signatures, ids), each `name: value\r\n`. */
  private headerLines(extra: Record<string, string>): string {
    let lines = this.ownHeaders;
    for (const name in extra) {
      const value = extra[name];
      // made by svc (ids, times, signatures), never by a caller's input; checked all the same
      if (!HEADER_NAME.test(name) || !HEADER_VALUE.test(value)) throw new DeliveryAborted('invalid header');
      lines += `${name}: ${value}\r\n`;
    }
    return lines;
  }

  private post(a: Attempt, t: ParsedTarget, host: CheckedHost, lines: string, body: Buffer): void {
    try {
      let entry = host.entry;
      if (!entry || entry.closed) host.entry = entry = this.acquirePool(t.url, host.resolved as ResolvedTarget);
      entry.active++;
      a.entry = entry;
      a.exchange = entry.pool.post(t.path, lines, body, a);
    } catch (err) {
      a.failSoon(err);
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
    const pool = new Http1Pool({
      url,
      connections: this.connections,
      keepAliveMs: 10_000,
      keepAliveMaxMs: 60_000,
      connect: pinnedLookup(url, resolved),
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
        e.pool.close().catch(() => e.pool.destroy());
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
 * One POST (an exchange of the origin's Http1Pool). The timeout (the deliverer's TimeoutGroup)
 * covers the whole exchange from the start of the attempt (connecting included); at most
 * MAX_RESPONSE_BYTES of the answer are read (past that the connection is dropped and the status
 * decides).
 */
class Attempt implements ExchangeHandler {
  status: number | undefined;
  ended = false;
  timeout: TimeoutGroup | null = null;
  /** its index in timeout.attempts */
  slot = 0;
  entry: PoolEntry | null = null;
  exchange: Exchange | null = null;
  /** what the request was (its headers are written out, signatures redacted, only when it ends) */
  sent: { host: string; lines: string; length: number } | null = null;
  /** the answer's head, once its status is known */
  private head = '';
  /** the first bytes of the answer's body (exchange-record.ts BODY_KEEP) */
  private body: BodyKeeper | null = null;
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
    this.exchange?.abort();
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
      r =
        status >= 200 && status < 300
          ? { delivered: true, status, duration_ms }
          : { delivered: false, status, error: `HTTP ${status}`, duration_ms };
    } else {
      const error = describeError(err ?? new DeliveryAborted('no response'), this.timeoutMs);
      r = status !== undefined ? { delivered: false, status, error, duration_ms } : { delivered: false, error, duration_ms };
    }
    const sent = this.sent;
    if (sent) {
      // the body was not read to its end unless the answer ended (err null)
      r[EXCHANGE] = exchangeRecord(
        `host: ${sent.host}\r\n${sent.lines}content-length: ${sent.length}\r\n`,
        status,
        this.head,
        this.body,
        err !== null,
      );
    }
    const done = this.done as AttemptCallback;
    // Over: the attempt lets go of what it points to. An attempt that V8 has moved to the old
    // generation is only found dead at a full collection; until then every young object it points
    // to (the callback, and through it the pipeline's grant, its event) would outlive each scavenge
    // and be promoted with it (BENCHMARKS.md, issue 33 step 9).
    this.done = null;
    this.exchange = null;
    this.timeout = null;
    this.entry = null;
    this.sent = null;
    this.body = null;
    this.head = '';
    done(r);
  }

  // ---- the exchange's handler (src/delivery/http1.ts)
  onStatus(status: number, head: string): void {
    this.status = status;
    this.head = head;
  }

  onBody(bytes: number, chunk: Buffer, start: number): void {
    (this.body ??= new BodyKeeper()).add(bytes, chunk, start);
    this.bytes += bytes;
    if (this.bytes > MAX_RESPONSE_BYTES) {
      this.exchange?.abort();
      this.settle(new ResponseTooLong('response over the limit'));
    }
  }

  onEnd(): void {
    this.settle(null);
  }

  onError(err: Error): void {
    this.settle(err);
  }
}
