/**
 * The in-process bus (`npm start`, no NATS). NATS semantics on the same subjects: tokens split on
 * '.', `*` one token, `>` one or more trailing tokens; queue groups (round robin); request/reply
 * through inbox subjects with a `no responders` error; delivery asynchronous but ordered per
 * subscription; handler exceptions are logged, never thrown to the publisher.
 */
import { randomBytes } from 'node:crypto';
import {
  BusRequestError,
  DEFAULT_REQUEST_TIMEOUT_MS,
  consoleBusLogger,
  errorInfo,
  parseJson,
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
}

export function createMemoryBus(opts: MemoryBusOptions = {}): Bus {
  const logger = opts.logger ?? consoleBusLogger;
  let subs: MemorySub[] = [];
  const roundRobin = new Map<string, number>();
  const inflight = new Set<Promise<unknown>>();
  let closed = false;

  function track<T>(p: Promise<T>): Promise<T> {
    inflight.add(p);
    const done = () => inflight.delete(p);
    p.then(done, done);
    return p;
  }

  function makeMessage(subject: string, data: Uint8Array, reply?: string): BusMessage {
    return {
      subject,
      data,
      reply,
      json<T = unknown>(): T {
        return parseJson<T>(data);
      },
      respond(resp: Uint8Array | string): boolean {
        if (!reply || closed) return false;
        route(reply, toBytes(resp));
        return true;
      },
    };
  }

  function schedule(sub: MemorySub): void {
    if (sub.scheduled) return;
    sub.scheduled = true;
    setImmediate(() => drain(sub));
  }

  function drain(sub: MemorySub): void {
    sub.scheduled = false;
    while (sub.pending.length > 0) {
      const msg = sub.pending.shift()!;
      if (sub.closed) {
        sub.pending.length = 0;
        return;
      }
      try {
        const r = sub.handler(msg);
        if (r && typeof (r as Promise<void>).then === 'function') {
          track(
            (r as Promise<void>).catch((err: unknown) =>
              logger.warn({ subject: msg.subject, ...errorInfo(err) }, 'bus handler failed'),
            ),
          );
        }
      } catch (err) {
        logger.warn({ subject: msg.subject, ...errorInfo(err) }, 'bus handler failed');
      }
    }
  }

  /** Delivers to the matching subscriptions; returns how many got the message. */
  function route(subject: string, data: Uint8Array, reply?: string): number {
    if (!isValidSubject(subject)) throw new Error(`invalid publish subject: ${JSON.stringify(subject)}`);
    const groups = new Map<string, MemorySub[]>();
    const targets: MemorySub[] = [];
    for (const sub of subs) {
      if (sub.closed || !subjectMatches(sub.pattern, subject)) continue;
      if (sub.queue === undefined) targets.push(sub);
      else {
        const g = groups.get(sub.queue);
        if (g) g.push(sub);
        else groups.set(sub.queue, [sub]);
      }
    }
    for (const [name, members] of groups) {
      const n = roundRobin.get(name) ?? 0;
      roundRobin.set(name, n + 1);
      targets.push(members[n % members.length]);
    }
    for (const sub of targets) {
      sub.pending.push(makeMessage(subject, data, reply));
      schedule(sub);
    }
    return targets.length;
  }

  function addSub(subject: string, handler: MemorySub['handler'], queue?: string): MemorySub {
    if (closed) throw new Error('bus closed');
    if (!isValidSubject(subject, { wildcards: true })) throw new Error(`invalid subscription subject: ${JSON.stringify(subject)}`);
    if (queue !== undefined && !isValidSubject(queue)) throw new Error(`invalid queue group: ${JSON.stringify(queue)}`);
    const sub: MemorySub = { pattern: subject, queue, handler, pending: [], scheduled: false, closed: false };
    subs.push(sub);
    return sub;
  }

  function removeSub(sub: MemorySub): void {
    sub.closed = true;
    sub.pending.length = 0;
    subs = subs.filter((s) => s !== sub);
  }

  const bus: Bus = {
    kind: 'memory',

    publish(subject, data) {
      if (closed) throw new Error('bus closed');
      route(subject, toBytes(data));
    },

    subscribe(subject, handler, o) {
      const sub = addSub(subject, handler, o?.queue);
      return {
        unsubscribe: () => removeSub(sub),
        drain: async () => {
          // no new messages (a request finds no responder); those already queued are handled
          subs = subs.filter((s) => s !== sub);
          while (!sub.closed && (sub.pending.length > 0 || sub.scheduled)) await new Promise<void>((r) => setImmediate(r));
          removeSub(sub);
        },
      };
    },

    request(subject, data, o) {
      if (closed) return Promise.reject(new BusRequestError('closed', subject));
      const timeoutMs = o?.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
      const inbox = `${INBOX_PREFIX.engine}.${randomBytes(12).toString('hex')}`;
      return new Promise<BusMessage>((resolve, reject) => {
        let timer: NodeJS.Timeout | undefined;
        const sub = addSub(inbox, (msg) => {
          if (timer) clearTimeout(timer);
          removeSub(sub);
          resolve(msg);
        });
        let n: number;
        try {
          n = route(subject, toBytes(data), inbox);
        } catch (err) {
          removeSub(sub);
          reject(err);
          return;
        }
        if (n === 0) {
          removeSub(sub);
          reject(new BusRequestError('no_responders', subject));
          return;
        }
        timer = setTimeout(() => {
          removeSub(sub);
          reject(new BusRequestError('timeout', subject));
        }, timeoutMs);
      });
    },

    async flush() {
      // Wait until every queued message has been handed to its handler.
      for (let i = 0; i < 10_000; i++) {
        if (!subs.some((s) => s.pending.length > 0 || s.scheduled)) return;
        await new Promise<void>((r) => setImmediate(r));
      }
    },

    async close() {
      if (closed) return;
      await bus.flush();
      while (inflight.size > 0) await Promise.allSettled([...inflight]);
      closed = true;
      for (const s of subs) {
        s.closed = true;
        s.pending.length = 0;
      }
      subs = [];
    },
  };
  return bus;
}
