// Outgoing webhook delivery (spec 5, 6.1, 8; CONTRACT 6.4). One POST per call, no retry, no
// redirects, the whole exchange bounded by the delivery timeout, at most 64 KiB of the answer
// read. Never throws: every outcome is a DeliveryResult.
import { randomUUID } from 'node:crypto';
import type { LookupAddress, LookupOneOptions } from 'node:dns';
import { setMaxListeners } from 'node:events';
import { isIP } from 'node:net';
import type { Logger } from 'pino';
import { Pool } from 'undici';
import type { Metrics } from '../metrics.ts';
import { systemClock, type Clock } from '../domain/clock.ts';
import { checkTarget, TargetLookupError, TargetRefusedError, urlHostname, type LookupAll, type ResolvedTarget } from './guard.ts';
import { signatureHeaders, signingKeys, type SigningKeys } from './signatures.ts';

export interface DeliveryTarget {
  url: string;
  /**
   * The webhook's signing keys, prepared once per webhook (signatures.ts signingKeys(row): the
   * current secret and, during a rotation's overlap, the previous one); or a bare current secret
   * (prepared per call); null or '' = unsigned.
   */
  secret: SigningKeys | string | null;
}

export interface DeliverOptions {
  /** The CloudEvent id: the webhook-id header. Without it, the body's `id` is read (one parse). */
  eventId?: string;
  signal?: AbortSignal;
}

export interface DeliveryResult {
  delivered: boolean;
  status?: number;
  error?: string;
  duration_ms: number;
}

export interface DelivererOptions {
  /** Whole-exchange timeout per delivery (spec 8: 5 s). */
  timeoutMs: number;
  allowPrivateTargets: boolean;
  logger: Logger;
  metrics: Metrics;
  userAgent?: string;
  /** Connections per origin (default 64). */
  connectionsPerOrigin?: number;
  /** An origin's pool unused for this long is closed (default 60 s). */
  poolIdleMs?: number;
  /** At most this many cached pools; the least recently used idle ones go first (default 256). */
  maxPools?: number;
  /** Name resolution for the target guard (tests). */
  lookup?: LookupAll;
  /** webhook-timestamp and the end of a rotation's overlap come from it (default the system clock). */
  clock?: Clock;
}

export const CE_CONTENT_TYPE = 'application/cloudevents+json; charset=utf-8';
/** At most this much of a receiver's answer is read (and discarded). */
export const MAX_RESPONSE_BYTES = 64 * 1024;
const DEFAULT_USER_AGENT = 'svc-webhooks/0.1';

interface PoolEntry {
  key: string;
  pool: Pool;
  lastUsed: number;
  active: number;
}

class DeliveryTimeout extends Error {
  constructor(readonly ms: number) {
    super(`timeout after ${ms} ms`);
  }
}
class DeliveryAborted extends Error {
  constructor(why: string) {
    super(why);
  }
}

export class Deliverer {
  private readonly timeoutMs: number;
  private readonly allowPrivate: boolean;
  private readonly logger: Logger;
  private readonly metrics: Metrics;
  private readonly userAgent: string;
  private readonly connections: number;
  private readonly poolIdleMs: number;
  private readonly maxPools: number;
  private readonly lookupAll?: LookupAll;
  private readonly clock: Clock;
  private readonly pools = new Map<string, PoolEntry>();
  private readonly running = new Set<Promise<DeliveryResult>>();
  /**
   * The controller of each delivery in flight, aborted by close(). (Not a listener per delivery on
   * one shared signal: adding and removing a listener scans that signal's listener list, which is
   * as long as the number of deliveries in flight.)
   */
  private readonly controllers = new Set<AbortController>();
  private sweeper: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(opts: DelivererOptions) {
    this.timeoutMs = opts.timeoutMs > 0 ? opts.timeoutMs : 5000;
    this.allowPrivate = opts.allowPrivateTargets;
    this.logger = opts.logger;
    this.metrics = opts.metrics;
    this.userAgent = opts.userAgent ?? DEFAULT_USER_AGENT;
    this.connections = opts.connectionsPerOrigin ?? 64;
    this.poolIdleMs = opts.poolIdleMs ?? 60_000;
    this.maxPools = opts.maxPools ?? 256;
    this.lookupAll = opts.lookup;
    this.clock = opts.clock ?? systemClock;
  }

  /** Deliveries started and not yet finished. */
  inFlight(): number {
    return this.running.size;
  }

  /** POST body to the target once. Never throws. */
  deliver(target: DeliveryTarget, body: string | Buffer, opts: DeliverOptions = {}): Promise<DeliveryResult> {
    const p = this.attempt(target, body, opts.eventId, opts.signal).catch((err): DeliveryResult => {
      // attempt() handles its own errors; this is a last line of defence
      return { delivered: false, error: `internal error: ${err instanceof Error ? err.message : String(err)}`, duration_ms: 0 };
    });
    this.running.add(p);
    void p.finally(() => this.running.delete(p));
    return p;
  }

  /**
   * Stop taking deliveries, wait for the in-flight ones (at most graceMs, default the delivery
   * timeout), abort what is left, then close every pool.
   */
  async close(graceMs: number = this.timeoutMs): Promise<void> {
    this.closed = true;
    if (this.running.size) {
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, Math.max(0, graceMs));
      });
      await Promise.race([Promise.allSettled([...this.running]), grace]);
      clearTimeout(timer);
    }
    const reason = new DeliveryAborted('aborted: shutting down');
    for (const ac of this.controllers) ac.abort(reason);
    if (this.running.size) await Promise.allSettled([...this.running]);
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.allSettled(pools.map((e) => e.pool.destroy()));
  }

  // ---------------------------------------------------------------- internals

  private async attempt(target: DeliveryTarget, body: string | Buffer, eventId: string | undefined, external?: AbortSignal): Promise<DeliveryResult> {
    const started = performance.now();
    let host = '?';
    let status: number | undefined;
    let entry: PoolEntry | null = null;
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new DeliveryTimeout(this.timeoutMs)), this.timeoutMs);
    const onExternal = () => ac.abort(new DeliveryAborted('aborted'));
    if (external) {
      // a caller's signal shared by many concurrent deliveries is normal, not a leak
      setMaxListeners(0, external);
      external.addEventListener('abort', onExternal, { once: true });
    }
    this.controllers.add(ac);
    try {
      if (this.closed) throw new DeliveryAborted('deliverer closed');
      if (external?.aborted) throw new DeliveryAborted('aborted');
      let url: URL;
      try {
        url = new URL(target.url);
      } catch {
        throw new DeliveryAborted('invalid url');
      }
      host = url.host;
      const resolved = await abortable(checkTarget(url, { allowPrivate: this.allowPrivate, lookup: this.lookupAll }), ac.signal);

      const payload = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
      const keys = typeof target.secret === 'string' ? signingKeys({ secret: target.secret }) : target.secret;
      const headers: Record<string, string> = {
        'content-type': CE_CONTENT_TYPE,
        'user-agent': this.userAgent,
        ...signatureHeaders(keys, eventId ?? idOf(payload), payload, this.clock.now()),
      };

      entry = this.acquirePool(url, resolved);
      const res = await entry.pool.request({
        method: 'POST',
        path: `${url.pathname || '/'}${url.search}`,
        headers,
        body: payload,
        signal: ac.signal,
        // the overall timer is authoritative; these only stop undici from waiting longer
        headersTimeout: this.timeoutMs + 1000,
        bodyTimeout: this.timeoutMs + 1000,
      });
      status = res.statusCode;
      const complete = await drain(res.body, MAX_RESPONSE_BYTES);
      // undici hands the connection back to the pool a tick after the body ends; resolving
      // after that lets the next delivery to this origin reuse it instead of opening another
      if (complete) await new Promise<void>((resolve) => setImmediate(resolve));
      if (status >= 200 && status < 300) return this.finish(started, host, { delivered: true, status });
      return this.finish(started, host, { delivered: false, status, error: `HTTP ${status}` });
    } catch (err) {
      const reason = ac.signal.aborted ? ac.signal.reason : err;
      return this.finish(started, host, { delivered: false, status, error: describeError(reason, this.timeoutMs) });
    } finally {
      clearTimeout(timer);
      external?.removeEventListener('abort', onExternal);
      this.controllers.delete(ac);
      if (entry) {
        entry.active--;
        entry.lastUsed = Date.now();
      }
    }
  }

  private finish(started: number, host: string, r: Omit<DeliveryResult, 'duration_ms'>): DeliveryResult {
    const seconds = (performance.now() - started) / 1000;
    // no undefined keys: the result is serialised as is (ping endpoint)
    const result: DeliveryResult = {
      delivered: r.delivered,
      ...(r.status !== undefined ? { status: r.status } : {}),
      ...(r.error !== undefined ? { error: r.error } : {}),
      duration_ms: Math.max(0, Math.round(seconds * 1000)),
    };
    this.metrics.deliveries.inc({ outcome: result.delivered ? 'success' : 'failure' });
    this.metrics.deliveryDuration.observe(seconds);
    if (result.delivered) {
      this.logger.debug({ host, status: result.status, duration_ms: result.duration_ms }, 'webhook delivered');
    } else {
      // the host only: never the path or query (they may carry tokens), the secret or the body
      this.logger.warn({ host, status: result.status, error: result.error, duration_ms: result.duration_ms }, 'webhook delivery failed');
    }
    return result;
  }

  /**
   * The keep-alive pool for this origin and vetted addresses (connecting to nothing else),
   * marked in use; the caller releases it.
   */
  private acquirePool(url: URL, resolved: ResolvedTarget): PoolEntry {
    const key = `${url.origin}|${resolved.addresses.map((a) => a.address).join(',')}`;
    const now = Date.now();
    let entry = this.pools.get(key);
    if (entry) {
      entry.lastUsed = now;
      entry.active++;
      // keep the Map in LRU order
      this.pools.delete(key);
      this.pools.set(key, entry);
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
      this.sweeper = setInterval(() => this.evict(Date.now()), Math.min(30_000, Math.max(1000, this.poolIdleMs / 2)));
      this.sweeper.unref();
    }
    return entry;
  }

  /** Close pools idle for poolIdleMs, and the least recently used idle ones above maxPools. */
  private evict(now: number): void {
    let excess = this.pools.size - this.maxPools;
    for (const [key, e] of this.pools) {
      if (e.active > 0) continue;
      if (excess > 0 || now - e.lastUsed >= this.poolIdleMs) {
        this.pools.delete(key);
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

/** The `id` of a CloudEvent body, for callers that did not pass it; a fresh one when there is none. */
function idOf(body: Buffer): string {
  try {
    const id = (JSON.parse(body.toString('utf8')) as { id?: unknown } | null)?.id;
    if (typeof id === 'string' && id && !/[\r\n]/.test(id)) return id;
  } catch {
    // not JSON: fall through
  }
  return `msg_${randomUUID().replace(/-/g, '')}`;
}

/**
 * Read at most limit bytes of a response body, discarding them; past that, destroy the stream
 * (and with it the connection). True when the body was read to its end.
 */
async function drain(body: NodeJS.ReadableStream & { destroy(err?: Error): unknown }, limit: number): Promise<boolean> {
  let seen = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    seen += chunk.length;
    if (seen > limit) {
      body.destroy();
      return false;
    }
  }
  return true;
}

/** Settle with p, or reject with the signal's reason when it aborts first. */
function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
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
