// Outgoing webhook attempts (spec 5, 6.1, 8; CONTRACT 6.4). One POST per call, no retry, no
// redirects; the timeout covers the whole exchange (connect, request, response) and starts when
// the attempt starts — a caller that waits for a slot calls attempt() only once it has one. At most
// 64 KiB of the answer is read. Never throws: every outcome is an AttemptResult. Signing is the
// caller's (src/delivery/signatures.ts): the headers come in ready.
import type { LookupAddress, LookupOneOptions } from 'node:dns';
import { isIP } from 'node:net';
import { Pool, type Dispatcher } from 'undici';
import { systemClock, type Clock, type Timer } from '../domain/clock.ts';
import { checkTarget, TargetLookupError, TargetRefusedError, urlHostname, type LookupAll, type ResolvedTarget } from './guard.ts';

export interface AttemptResult {
  delivered: boolean;
  status?: number;
  error?: string;
  duration_ms: number;
}

export interface DelivererOptions {
  /** Whole-exchange timeout per attempt (spec 8: 5 s). */
  timeoutMs: number;
  allowPrivateTargets: boolean;
  clock?: Clock;
  userAgent?: string;
  /** Connections per origin (default 64). */
  connectionsPerOrigin?: number;
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
}

class DeliveryTimeout extends Error {
  constructor(readonly ms: number) {
    super(`timeout after ${ms} ms`);
  }
}
class DeliveryAborted extends Error {}

const MAX_CACHED_TARGETS = 10_000;

export class Deliverer {
  private readonly timeoutMs: number;
  private readonly allowPrivate: boolean;
  private readonly clock: Clock;
  private readonly userAgent: string;
  private readonly connections: number;
  private readonly poolIdleMs: number;
  private readonly maxPools: number;
  private readonly targetTtlMs: number;
  private readonly lookupAll?: LookupAll;
  private readonly pools = new Map<string, PoolEntry>();
  private readonly targets = new Map<string, ParsedTarget>();
  private readonly hosts = new Map<string, CheckedHost>();
  private readonly running = new Set<Promise<AttemptResult>>();
  /** Attempts in flight, aborted by close(). */
  private readonly attempts = new Set<Attempt>();
  private sweeper: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(opts: DelivererOptions) {
    this.timeoutMs = opts.timeoutMs > 0 ? opts.timeoutMs : 5000;
    this.allowPrivate = opts.allowPrivateTargets;
    this.clock = opts.clock ?? systemClock;
    this.userAgent = opts.userAgent ?? DEFAULT_USER_AGENT;
    this.connections = opts.connectionsPerOrigin ?? 64;
    this.poolIdleMs = opts.poolIdleMs ?? 60_000;
    this.maxPools = opts.maxPools ?? 256;
    this.targetTtlMs = opts.targetTtlMs ?? 30_000;
    this.lookupAll = opts.lookup;
  }

  /** Attempts started and not yet finished. */
  inFlight(): number {
    return this.running.size;
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
    const p = this.run(url, headers, body).catch(
      (err): AttemptResult => ({ delivered: false, error: `internal error: ${err instanceof Error ? err.message : String(err)}`, duration_ms: 0 }),
    );
    this.running.add(p);
    void p.finally(() => this.running.delete(p));
    return p;
  }

  /**
   * Stop taking attempts, wait for the ones in flight (at most graceMs, default the timeout),
   * abort what is left, then close every pool.
   */
  async close(graceMs: number = this.timeoutMs): Promise<void> {
    this.closed = true;
    if (this.running.size) {
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, graceMs))));
      await Promise.race([Promise.allSettled([...this.running]), grace]);
      clearTimeout(timer);
    }
    const reason = new DeliveryAborted('aborted: shutting down');
    for (const a of this.attempts) a.abort(reason);
    if (this.running.size) await Promise.allSettled([...this.running]);
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.allSettled(pools.map((e) => e.pool.destroy()));
  }

  // ---------------------------------------------------------------- internals

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
  private checked(t: ParsedTarget, now: number): ResolvedTarget | undefined {
    const hit = this.hosts.get(t.hostKey);
    if (!hit || now - hit.at >= this.targetTtlMs) return undefined;
    if (hit.resolved) return hit.resolved;
    throw hit.refused;
  }

  /** Resolve and check the host (when checked() had no fresh answer), and remember the answer. */
  private async check(t: ParsedTarget, now: number): Promise<ResolvedTarget> {
    try {
      const resolved = await checkTarget(t.url, { allowPrivate: this.allowPrivate, lookup: this.lookupAll });
      this.remember(t.hostKey, { at: now, resolved });
      return resolved;
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

  private async run(url: string, extra: Record<string, string>, body: Buffer): Promise<AttemptResult> {
    const started = performance.now();
    const attempt = new Attempt(this.timeoutMs, this.clock);
    this.attempts.add(attempt);
    let entry: PoolEntry | null = null;
    try {
      if (this.closed) throw new DeliveryAborted('deliverer closed');
      let t: ParsedTarget;
      try {
        t = this.parse(url);
      } catch {
        throw new DeliveryAborted('invalid url');
      }
      const resolved = this.checked(t, this.clock.now()) ?? (await attempt.within(this.check(t, this.clock.now())));
      entry = this.acquirePool(t.url, resolved);
      const status = await attempt.post(entry.pool, t.path, { 'content-type': CE_CONTENT_TYPE, 'user-agent': this.userAgent, ...extra }, body);
      if (status >= 200 && status < 300) return result(started, { delivered: true, status });
      return result(started, { delivered: false, status, error: `HTTP ${status}` });
    } catch (err) {
      return result(started, { delivered: false, status: attempt.status, error: describeError(err, this.timeoutMs) });
    } finally {
      attempt.done();
      this.attempts.delete(attempt);
      if (entry) {
        entry.active--;
        entry.lastUsed = this.clock.now();
      }
    }
  }

  /**
   * The keep-alive pool for this origin and vetted addresses (connecting to nothing else),
   * marked in use; the caller releases it.
   */
  private acquirePool(url: URL, resolved: ResolvedTarget): PoolEntry {
    const key = `${url.origin}|${resolved.addresses.map((a) => a.address).join(',')}`;
    const now = this.clock.now();
    let entry = this.pools.get(key);
    if (entry) {
      entry.lastUsed = now;
      entry.active++;
      return entry;
    }
    const hostname = urlHostname(url);
    const { address, family } = resolved;
    const all: LookupAddress[] = resolved.addresses.map((a) => ({ address: a.address, family: a.family }));
    // net.connect asks for all addresses when it races families (autoSelectFamily), else one
    const pinned = (_host: string, options: LookupOneOptions & { all?: boolean }, cb: (...args: unknown[]) => void) => {
      if (options && options.all) cb(null, all);
      else cb(null, address, family);
    };
    const pool = new Pool(url.origin, {
      connections: this.connections,
      keepAliveTimeout: 10_000,
      keepAliveMaxTimeout: 60_000,
      connect: {
        timeout: this.timeoutMs,
        // IP literals need no lookup; names are pinned to the address the guard checked.
        ...(isIP(hostname) ? {} : { lookup: pinned as never, servername: hostname }),
      },
    });
    entry = { key, pool, lastUsed: now, active: 1 };
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

function result(started: number, r: Omit<AttemptResult, 'duration_ms'>): AttemptResult {
  // no undefined keys: the result is serialised as is (ping endpoint)
  return {
    delivered: r.delivered,
    ...(r.status !== undefined ? { status: r.status } : {}),
    ...(r.error !== undefined ? { error: r.error } : {}),
    duration_ms: Math.max(0, Math.round(performance.now() - started)),
  };
}

/** The response is larger than we read: cut, and judged by its status. */
class ResponseTooLong extends Error {}

/**
 * One POST on undici's dispatch API: no AbortController, no body stream. The timeout covers the
 * whole exchange from the start of the attempt (connecting included); at most MAX_RESPONSE_BYTES
 * of the answer are read (past that the connection is dropped and the status decides).
 */
class Attempt implements Dispatcher.DispatchHandler {
  status: number | undefined;
  private controller: Dispatcher.DispatchController | null = null;
  private readonly timer: Timer;
  private failure: Error | null = null;
  private settle: ((err: Error | null) => void) | null = null;
  private bytes = 0;
  private ended = false;

  constructor(
    private readonly timeoutMs: number,
    clock: Clock,
  ) {
    this.timer = clock.setTimeout(() => this.abort(new DeliveryTimeout(timeoutMs)), timeoutMs);
  }

  /** Resolves or rejects with p, or rejects at the timeout (or an abort) first. */
  within<T>(p: Promise<T>): Promise<T> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<T>((resolve, reject) => {
      this.settle = (err) => err && reject(err);
      p.then(
        (v) => (this.settle = null, this.failure ? reject(this.failure) : resolve(v)),
        (e) => (this.settle = null, reject(this.failure ?? e)),
      );
    });
  }

  /** POST and read the answer; resolves with the status, rejects with why it failed. */
  post(pool: Pool, path: string, headers: Record<string, string>, body: Buffer): Promise<number> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<number>((resolve, reject) => {
      this.settle = (err) => {
        this.settle = null;
        if (err && !(err instanceof ResponseTooLong)) reject(err);
        else if (this.status === undefined) reject(err ?? new DeliveryAborted('no response'));
        else resolve(this.status);
      };
      pool.dispatch(
        {
          method: 'POST',
          path,
          headers,
          body,
          // the attempt's own timer is authoritative; these only stop undici from waiting longer
          headersTimeout: this.timeoutMs + 1000,
          bodyTimeout: this.timeoutMs + 1000,
        },
        this,
      );
    });
  }

  abort(err: Error): void {
    if (this.ended) return;
    this.failure ??= err;
    this.controller?.abort(err);
    this.finish(err);
  }

  done(): void {
    this.ended = true;
    this.timer.cancel();
  }

  private finish(err: Error | null): void {
    const settle = this.settle;
    this.settle = null;
    settle?.(err);
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
      this.finish(cut);
    }
  }

  onResponseEnd(): void {
    // undici hands the connection back to the pool shortly after this (measured: after two
    // turns of the event loop); resolving then lets the next attempt at this origin reuse it
    // instead of opening another
    setImmediate(() => setImmediate(() => this.finish(null)));
  }

  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    this.finish(this.failure ?? err);
  }
}

const TLS_CODES = new Set([
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'ERR_SSL_WRONG_VERSION_NUMBER',
]);

/** A short error string that names no URL, secret or body. */
export function describeError(err: unknown, timeoutMs: number): string {
  if (err instanceof DeliveryTimeout) return err.message;
  if (err instanceof DeliveryAborted) return err.message;
  if (err instanceof TargetRefusedError) return err.short;
  if (err instanceof TargetLookupError) return `dns lookup failed (${err.code})`;
  const e = err as { code?: string; name?: string; cause?: unknown } | null;
  const code = e?.code ?? (e?.cause as { code?: string } | undefined)?.code;
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
      return 'connection reset';
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
      return 'connection closed by receiver';
    case 'ETIMEDOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
      return 'connect timeout';
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return `timeout after ${timeoutMs} ms`;
    case 'ENETUNREACH':
    case 'EHOSTUNREACH':
      return 'host unreachable';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `dns lookup failed (${code})`;
    case 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH':
    case 'HPE_INVALID_CONSTANT':
    case 'HPE_INVALID_HEADER_TOKEN':
    case 'UND_ERR_INFO':
      return 'invalid HTTP response';
  }
  if (code && TLS_CODES.has(code)) return `tls error (${code})`;
  if (code && /^(ERR_SSL|ERR_TLS)/.test(code)) return `tls error (${code})`;
  if (code && /^HPE_/.test(code)) return 'invalid HTTP response';
  if (e?.name === 'AbortError') return 'aborted';
  return code ? `network error (${code})` : 'network error';
}
