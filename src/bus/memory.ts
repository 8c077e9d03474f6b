/**
 * The in-process bus (`npm start`, no NATS). NATS semantics on the same subjects: tokens split on
 * '.', `*` one token, `>` one or more trailing tokens; queue groups (round robin); request/reply
 * through inbox subjects with a `no responders` error; delivery asynchronous but ordered per
 * subscription; handler exceptions are logged, never thrown to the publisher.
 */
import { randomBytes } from 'node:crypto';
import { systemClock, type Clock, type Timer } from '../domain/clock.ts';
import {
  BusRequestError,
  DEFAULT_REQUEST_TIMEOUT_MS,
  consoleBusLogger,
  parseJson,
  runHandler,
  toBytes,
  type Bus,
  type BusLogger,
  type BusMessage,
  type Subscription,
} from './bus.ts';
import { INBOX_PREFIX, isValidSubject, subjectMatches } from './subjects.ts';

interface MemorySub {
  pattern: string;
  queue?: string;
  handler: (msg: BusMessage) => void | Promise<void>;
  pending: BusMessage[];
  scheduled: boolean;
  closed: boolean;
}

export interface MemoryBusOptions {
  logger?: BusLogger;
  /** times a request out (default: the system clock) */
  clock?: Clock;
}

export function createMemoryBus(opts: MemoryBusOptions = {}): Bus {
  return new MemoryBus(opts.logger ?? consoleBusLogger, opts.clock ?? systemClock);
}

const nextTurn = () => new Promise<void>((r) => setImmediate(r));

class MemoryBus implements Bus {
  readonly kind = 'memory' as const;
  private subs: MemorySub[] = [];
  private readonly roundRobin = new Map<string, number>();
  private readonly inflight = new Set<Promise<unknown>>();
  private closed = false;

  constructor(
    private readonly logger: BusLogger,
    private readonly clock: Clock,
  ) {}

  publish(subject: string, data: Uint8Array | string): void {
    if (this.closed) throw new Error('bus closed');
    this.route(subject, toBytes(data));
  }

  subscribe(subject: string, handler: MemorySub['handler'], o?: { queue?: string }): Subscription {
    const sub = this.addSub(subject, handler, o?.queue);
    return {
      unsubscribe: () => this.removeSub(sub),
      drain: async () => {
        // no new messages (a request finds no responder); those already queued are handled
        this.subs = this.subs.filter((s) => s !== sub);
        while (!sub.closed && (sub.pending.length > 0 || sub.scheduled)) await nextTurn();
        this.removeSub(sub);
      },
    };
  }

  request(subject: string, data: Uint8Array | string, o?: { timeoutMs?: number }): Promise<BusMessage> {
    if (this.closed) return Promise.reject(new BusRequestError('closed', subject));
    const timeoutMs = o?.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    const inbox = `${INBOX_PREFIX.engine}.${randomBytes(12).toString('hex')}`;
    return new Promise<BusMessage>((resolve, reject) => {
      let timer: Timer | undefined;
      const sub = this.addSub(inbox, (msg) => {
        timer?.cancel();
        this.removeSub(sub);
        resolve(msg);
      });
      let n: number;
      try {
        n = this.route(subject, toBytes(data), inbox);
      } catch (err) {
        this.removeSub(sub);
        reject(err);
        return;
      }
      if (n === 0) {
        this.removeSub(sub);
        reject(new BusRequestError('no_responders', subject));
        return;
      }
      timer = this.clock.setTimeout(() => {
        this.removeSub(sub);
        reject(new BusRequestError('timeout', subject));
      }, timeoutMs);
    });
  }

  async flush(): Promise<void> {
    // Wait until every queued message has been handed to its handler.
    for (let i = 0; i < 10_000; i++) {
      if (!this.subs.some((s) => s.pending.length > 0 || s.scheduled)) return;
      await nextTurn();
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.flush();
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
    this.closed = true;
    for (const s of this.subs) {
      s.closed = true;
      s.pending.length = 0;
    }
    this.subs = [];
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.inflight.add(p);
    const done = () => this.inflight.delete(p);
    p.then(done, done);
    return p;
  }

  private makeMessage(subject: string, data: Uint8Array, reply?: string): BusMessage {
    return {
      subject,
      data,
      reply,
      json: <T = unknown>(): T => parseJson<T>(data),
      respond: (resp: Uint8Array | string): boolean => {
        if (!reply || this.closed) return false;
        this.route(reply, toBytes(resp));
        return true;
      },
    };
  }

  private schedule(sub: MemorySub): void {
    if (sub.scheduled) return;
    sub.scheduled = true;
    setImmediate(() => this.drain(sub));
  }

  private drain(sub: MemorySub): void {
    sub.scheduled = false;
    while (sub.pending.length > 0) {
      const msg = sub.pending.shift()!;
      if (sub.closed) {
        sub.pending.length = 0;
        return;
      }
      const running = runHandler(sub.handler, msg, this.logger);
      if (running) this.track(running);
    }
  }

  /** Delivers to the matching subscriptions; returns how many got the message. */
  private route(subject: string, data: Uint8Array, reply?: string): number {
    if (!isValidSubject(subject)) throw new Error(`invalid publish subject: ${JSON.stringify(subject)}`);
    const groups = new Map<string, MemorySub[]>();
    const targets: MemorySub[] = [];
    for (const sub of this.subs) {
      if (sub.closed || !subjectMatches(sub.pattern, subject)) continue;
      if (sub.queue === undefined) targets.push(sub);
      else {
        const g = groups.get(sub.queue);
        if (g) g.push(sub);
        else groups.set(sub.queue, [sub]);
      }
    }
    for (const [name, members] of groups) {
      const n = this.roundRobin.get(name) ?? 0;
      this.roundRobin.set(name, n + 1);
      targets.push(members[n % members.length]);
    }
    for (const sub of targets) {
      sub.pending.push(this.makeMessage(subject, data, reply));
      this.schedule(sub);
    }
    return targets.length;
  }

  private addSub(subject: string, handler: MemorySub['handler'], queue?: string): MemorySub {
    if (this.closed) throw new Error('bus closed');
    if (!isValidSubject(subject, { wildcards: true })) throw new Error(`invalid subscription subject: ${JSON.stringify(subject)}`);
    if (queue !== undefined && !isValidSubject(queue)) throw new Error(`invalid queue group: ${JSON.stringify(queue)}`);
    const sub: MemorySub = { pattern: subject, queue, handler, pending: [], scheduled: false, closed: false };
    this.subs.push(sub);
    return sub;
  }

  private removeSub(sub: MemorySub): void {
    sub.closed = true;
    sub.pending.length = 0;
    this.subs = this.subs.filter((s) => s !== sub);
  }
}
