// NATS mode, ordered webhooks (CONTRACT 10.1: "across kill -9 and with any number of workers, a key
// never goes backwards; only the attempt in flight may repeat; keys in parallel"): the events of
// `per_key` webhooks from SVC_ORDERED into this plane's ordered pipeline, for the partitions this
// plane owns.
//
// One owner per partition at a time. The relay publishes each keyed event of an org with `per_key`
// webhooks on its partition of (org, key), in commit order, one event a message (src/handoff/
// outbox-relay.ts): a partition holds its keys' events in sequence order. A plane owns a
// partition while it holds its lease, key `p<n>` of KV svc_ordered_leases (TTL
// ORDERED_LEASE_TTL_MS): taken with `create` (fails while another holds it), renewed every
// RENEW_MS with `update` at the revision it holds (fails once the lease lapsed and someone else
// took it). The owner takes over by making the partition's consumer afresh (delete, then create
// with deliver-all): a work-queue stream keeps exactly the messages no owner acked, so the new
// consumer starts at the oldest of them and hands them out in order, the old owner's last attempts
// first, then the rest: nothing later comes before them (a consumer that kept its state would hand
// out new messages before the old owner's came back after the ack wait).
//
// The owner feeds the partition's messages to the pipeline in order; the pipeline keeps a line per
// (webhook, key) and attempts one event of a key at a time (pipeline.ts). Each message is acked once
// its event's attempts have outcomes, so what is not acked is at most, per key, the attempt in
// flight and those waiting behind it. Fence: every attempt checks, as it starts, that the lease is
// still valid on this plane's clock (renewed less than VALID_MS ago: well within the TTL, so the
// server cannot have let it lapse) and that the partition is not being handed back: a paused owner
// that wakes after it lost the lease attempts nothing more (the pipeline releases those events).
//
// An event with several `per_key` webhooks records which of them it had (KV svc_progress, key
// `ordered.<event id>`) before the next event of the key goes to any of them, so that a new owner
// repeats none of them; events with one (the common case) need no record.
//
// A nats-server restart may forget the last acks it got (src/dataplane/sources/jetstream/reconnect.ts
// tells the hop path's answer): the plane remembers the messages it settled for SETTLED_MEMORY_MS and
// acks such a message again at once, not attempting it a second time behind later ones (bounded:
// SETTLED_MEMORY_MS and SETTLED_MEMORY_MAX; a new owner after the restart has no such memory).
//
// Spread. Each plane says it is there (key `plane.<id>`, renewed with its leases) and holds at most
// its share of the partitions, ceil(partitions / planes): above it, it hands one back each round
// (no new attempts, the attempts in flight finish and are acked, then the lease is deleted, so the
// next owner starts exactly after them).
import type { Logger } from 'pino';
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type Consumer,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { nanos } from '@nats-io/transport-node';
import type { Clock, Timer } from '../../../domain/clock.ts';
import { sleep } from '../../../domain/clock.ts';
import { decodeRoute } from '../../../domain/event-route.ts';
import {
  EVENT_ID_HEADER,
  kvStreamName,
  ORDERED_LEASE_TTL_MS,
  ORDERED_LEASES_BUCKET,
  ORDERED_PARTITIONS,
  ORDERED_STREAM,
  orderedConsumer,
  REPLAY_WINDOW_MS,
  SEAL_HEADER,
  storedAtMs,
} from '../../../bus/nats/jetstream.ts';
import { orderedSubject } from '../../../bus/subjects.ts';
import { decodeHopMessage } from '../../../bus/hop.ts';
import type { Seal } from '../../../bus/seal.ts';
import type { DeliveryPipeline, InboundEvent, ProgressStore } from '../../pipeline.ts';
import type { DropReason } from './source.ts';

/** Leases are renewed (and free partitions looked for) this often. */
export const RENEW_MS = 1000;
/** A lease is taken as valid for this long after the renewal that was sent last succeeded (the server keeps it ORDERED_LEASE_TTL_MS). */
const VALID_MS = ORDERED_LEASE_TTL_MS - 1500;
/** How long a pull request waits on the server. */
const PULL_EXPIRES_MS = 2000;
/** Messages asked for in one pull at most. */
const MAX_PULL = 256;
/**
 * A partition's consumer hands a message out again after this long unacked: to this owner, who
 * holds it already and ignores the copy (a takeover makes the consumer afresh, so nothing waits for it).
 */
const ORDERED_ACK_WAIT_MS = 10 * 60_000;
/** How long a plane remembers the messages it settled (acked again if handed out again: a server that forgot the ack), */
const SETTLED_MEMORY_MS = 2 * 60_000;
/** ... and how many at most (memory stays bounded whatever the rate). */
const SETTLED_MEMORY_MAX = 100_000;

export interface OrderedSourceOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  leases: KV;
  /** KV svc_progress: what an event with several per_key webhooks had */
  progress: KV;
  /** this plane (a lease names it, with a random suffix: one process, one holder) */
  workerId: string;
  seal: Seal;
  pipeline: DeliveryPipeline;
  clock: Clock;
  logger: Logger;
  dropped(reason: DropReason, events?: number): void;
  replayWindowMs?: number;
}

/** A partition this plane owns. */
interface Owned {
  partition: number;
  /** the lease's revision held */
  revision: number;
  /** attempts may start until then (clock ms) */
  validUntil: number;
  /** handed back: no attempt starts, the lease goes once nothing is held */
  closing: boolean;
  /** lost or stopped: pulls no more */
  stopped: boolean;
  /** messages held, by id: acked once their event settles */
  held: Map<string, JsMsg>;
  current: { stop(): void } | null;
  loop: Promise<void> | null;
}

const progressKey = (eventId: string) => `ordered.${eventId}`;
const leaseKey = (partition: number) => `p${partition}`;
const PLANE_PREFIX = 'plane.';

/** The pipeline's progress store for ordered events: which per_key webhooks an event had (several only). */
export function orderedProgress(kv: KV): ProgressStore {
  return {
    async save(events) {
      await Promise.all(events.map((e) => kv.put(progressKey(e.event.id), JSON.stringify(e.done))));
    },
  };
}

export class OrderedSource {
  private readonly owned = new Map<number, Owned>();
  private readonly holder: string;
  private stopping = false;
  private ticker: Timer | null = null;
  private ticking = false;
  private rounds = 0;
  private planes = 1;
  private readonly replayWindowMs: number;
  /** messages settled here lately, by id, and when (oldest first) */
  private readonly settled = new Map<string, number>();
  /** takeovers so far (a test's figure) */
  takeovers = 0;

  constructor(private readonly o: OrderedSourceOptions) {
    this.holder = `${o.workerId}.${Math.random().toString(36).slice(2, 10)}`;
    this.replayWindowMs = o.replayWindowMs ?? REPLAY_WINDOW_MS;
  }

  /** The partitions this plane owns now. */
  partitions(): number[] {
    return [...this.owned.keys()].sort((a, b) => a - b);
  }

  /** Say this plane is there, take its share of the free partitions, and go on doing so every RENEW_MS. */
  async start(): Promise<void> {
    await this.tick();
    this.ticker = this.o.clock.setInterval(() => void this.tick(), RENEW_MS);
  }

  private async tick(): Promise<void> {
    if (this.ticking || this.stopping) return;
    this.ticking = true;
    try {
      await this.o.leases.put(`${PLANE_PREFIX}${this.holder}`, '1').catch(() => {});
      this.forgetSettled();
      if (this.rounds++ % 3 === 0) this.planes = Math.max(1, await this.countPlanes().catch(() => this.planes));
      await Promise.all([...this.owned.values()].map((p) => this.renew(p)));
      const share = Math.ceil(ORDERED_PARTITIONS / this.planes);
      const open = [...this.owned.values()].filter((p) => !p.closing && !p.stopped);
      if (open.length > share) {
        // one a round, the one holding least: its keys wait the shortest
        open.sort((a, b) => a.held.size - b.held.size);
        this.handBack(open[0]);
      } else if (open.length < share) {
        await this.takeFree(share - open.length);
      }
    } catch (err) {
      this.o.logger.warn({ err: String(err) }, 'ordered partitions: a round of leases failed; trying again');
    } finally {
      this.ticking = false;
    }
  }

  private forgetSettled(): void {
    const before = this.o.clock.now() - SETTLED_MEMORY_MS;
    for (const [id, at] of this.settled) {
      if (at >= before) break;
      this.settled.delete(id);
    }
  }

  /** The planes that said they are there within the lease TTL (KV keys `plane.*` not yet expired). */
  private async countPlanes(): Promise<number> {
    const info = await this.o.jsm.streams.info(kvStreamName(ORDERED_LEASES_BUCKET), {
      subjects_filter: `$KV.${ORDERED_LEASES_BUCKET}.${PLANE_PREFIX}>`,
    });
    return Object.keys(info.state.subjects ?? {}).length;
  }

  private async renew(p: Owned): Promise<void> {
    if (p.stopped) return;
    const sent = this.o.clock.now();
    try {
      p.revision = await this.o.leases.update(leaseKey(p.partition), this.holder, p.revision);
      p.validUntil = sent + VALID_MS;
    } catch (err) {
      if (this.o.clock.now() < p.validUntil + ORDERED_LEASE_TTL_MS && !/wrong last sequence/i.test(String(err))) return;
      this.o.logger.warn(
        { partition: p.partition, err: String(err) },
        'lost the lease of an ordered partition; its keys go to its next owner',
      );
      this.lose(p);
    }
  }

  /** No attempt of the partition starts here any more; what it holds is left unacked for the next owner. */
  private lose(p: Owned): void {
    p.stopped = true;
    p.validUntil = 0;
    p.current?.stop();
    this.owned.delete(p.partition);
  }

  private async takeFree(n: number): Promise<void> {
    const free = Array.from({ length: ORDERED_PARTITIONS }, (_, i) => i).filter((i) => !this.owned.has(i));
    for (let i = free.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [free[i], free[j]] = [free[j], free[i]];
    }
    for (const partition of free) {
      if (n === 0 || this.stopping) return;
      const sent = this.o.clock.now();
      let revision: number;
      try {
        revision = await this.o.leases.create(leaseKey(partition), this.holder);
      } catch {
        continue; // another plane holds it
      }
      n--;
      const p: Owned = {
        partition,
        revision,
        validUntil: sent + VALID_MS,
        closing: false,
        stopped: false,
        held: new Map(),
        current: null,
        loop: null,
      };
      this.owned.set(partition, p);
      try {
        await this.takeOver(p);
      } catch (err) {
        this.o.logger.warn({ partition, err: String(err) }, 'could not take over an ordered partition; giving it back');
        this.lose(p);
        await this.o.leases.delete(leaseKey(partition), { previousSeq: p.revision }).catch(() => {});
      }
    }
  }

  /** The partition's consumer made afresh (it starts at the oldest message not acked), then pulled. */
  private async takeOver(p: Owned): Promise<void> {
    const name = orderedConsumer(p.partition);
    await this.o.jsm.consumers.delete(ORDERED_STREAM, name).catch((err: unknown) => {
      if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound)) throw err;
    });
    await this.o.jsm.consumers.add(ORDERED_STREAM, {
      durable_name: name,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(ORDERED_ACK_WAIT_MS),
      max_deliver: -1,
      filter_subject: orderedSubject(p.partition),
    });
    const consumer = await this.o.js.consumers.get(ORDERED_STREAM, name);
    this.takeovers++;
    this.o.logger.info({ partition: p.partition }, 'took over an ordered partition');
    p.loop = this.pull(p, consumer);
  }

  private async pull(p: Owned, consumer: Consumer): Promise<void> {
    while (!p.stopped && !p.closing) {
      const room = this.o.pipeline.room();
      if (room === 0) {
        await new Promise<void>((r) => this.o.pipeline.whenRoom(r));
        continue;
      }
      try {
        const batch = await consumer.fetch({ max_messages: Math.min(room, MAX_PULL), expires: PULL_EXPIRES_MS });
        p.current = batch;
        for await (const m of batch) if (!p.stopped && !p.closing) await this.take(p, m);
      } catch (err) {
        if (p.stopped || p.closing) break;
        this.o.logger.warn({ partition: p.partition, err: String(err) }, 'could not pull an ordered partition; retrying');
        await sleep(this.o.clock, 1000);
      } finally {
        p.current = null;
      }
    }
  }

  private async take(p: Owned, m: JsMsg): Promise<void> {
    const id = m.headers?.get(EVENT_ID_HEADER) ?? '';
    const seal = m.headers?.get(SEAL_HEADER) ?? '';
    if (p.held.has(id)) return; // a copy after the ack wait: held already
    if (this.settled.has(id)) {
      m.ack(); // settled here already: a server that forgot the ack (a restart)
      return;
    }
    const sealedAt = id && seal ? this.o.seal.openHop(id, m.data, seal) : null;
    if (sealedAt === null) {
      this.o.dropped('forged');
      m.term();
      return;
    }
    const decoded = decodeHopMessage(m.data);
    const route = decoded?.events.length === 1 ? decodeRoute(decoded.events[0].route) : null;
    if (!decoded || !route) {
      this.o.dropped('unparseable');
      m.term();
      return;
    }
    if (storedAtMs(m) - sealedAt > this.replayWindowMs) {
      this.o.dropped('replayed');
      m.term();
      return;
    }
    const e = decoded.events[0];
    const several = decoded.ordered.length > 1;
    let done: string[] = [];
    if (several) {
      const rec = await this.o.progress.get(progressKey(e.id)).catch(() => null);
      if (rec?.operation === 'PUT') done = JSON.parse(rec.string()) as string[];
      if (p.stopped || p.closing) return;
    }
    p.held.set(id, m);
    const ev: InboundEvent = {
      id: e.id,
      route,
      body: e.body,
      done,
      only: decoded.ordered,
      fenced: () => p.stopped || p.closing || this.o.clock.now() > p.validUntil,
      settle: () => {
        if (p.held.delete(id)) m.ack();
        this.settled.set(id, this.o.clock.now());
        if (this.settled.size > SETTLED_MEMORY_MAX) this.settled.delete(this.settled.keys().next().value!);
        if (several) void this.o.progress.delete(progressKey(e.id)).catch(() => {});
        this.afterLetGo(p);
      },
      release: () => {
        p.held.delete(id);
        // fenced while still owned (a renewal late): the consumer would not hand it out again, so
        // the partition goes back, and its next owner (maybe this plane) makes the consumer afresh
        if (!p.stopped && !p.closing && !this.stopping) this.handBack(p);
        else this.afterLetGo(p);
      },
    };
    this.o.pipeline.accept(ev);
  }

  /** Stop taking the partition's messages; once none is held (acked, or released), delete the lease. */
  private handBack(p: Owned): void {
    p.closing = true;
    p.current?.stop();
    this.o.logger.info({ partition: p.partition }, 'handing an ordered partition back (more than this plane’s share)');
    this.afterLetGo(p);
  }

  private afterLetGo(p: Owned): void {
    if (!p.closing || p.held.size > 0 || p.stopped) return;
    p.stopped = true;
    this.owned.delete(p.partition);
    void this.o.leases.delete(leaseKey(p.partition), { previousSeq: p.revision }).catch(() => {});
  }

  /**
   * SIGTERM: pull no more; once the pipeline has drained (its attempts in flight finished and acked,
   * the rest released), `released()` gives the leases back so the next owners start at once.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.ticker?.cancel();
    for (const p of this.owned.values()) {
      p.closing = true;
      p.current?.stop();
    }
  }

  /** After the pipeline's drain: every lease still held is deleted (nothing of it is in flight any more). */
  async released(): Promise<void> {
    const owned = [...this.owned.values()];
    this.owned.clear();
    await Promise.all(
      owned.map((p) => {
        p.stopped = true;
        return this.o.leases.delete(leaseKey(p.partition), { previousSeq: p.revision }).catch(() => {});
      }),
    );
    await this.o.leases.delete(`${PLANE_PREFIX}${this.holder}`).catch(() => {});
  }
}
