// NATS mode: the outbox relay (the one thing svc calls a relay: queued events → JetStream; embedded
// mode has none, its data plane reads the outbox itself). There are two, one per table that queues
// events (relay-queues.ts): the event history, where an emitted event's history row is its queue
// row, and the outbox (recovery items, and events when no history is kept). "The outbox" and
// "rows" below are the relay's table and its rows. Publishes committed events to the SVC_EVENTS
// stream in batches, one JetStream message per batch (src/bus/hop.ts), so that the durable hop's
// fixed costs (seal, publish, store, delivery, ack, removal, progress) are paid per batch
// (ARCHITECTURE). Observers get one plain message per event on svc.events.… (CONTRACT 5.2) as its
// batch is published, in the same socket write; no stream keeps those.
//
// Batches are made where rows are committed, not here: each outbox row names its batch (`assign`,
// called by NATS mode's EventQueue, relay-event-queue.ts, for every row the engine's
// transaction inserts), and a batch takes rows until the relay takes it, or until it is full.
// While a publish is under way the rows of later commits gather in the open batch, so under load
// batches grow by themselves and an idle relay publishes a lone event at once (no timer). Because
// a row's batch is in the table, the same rows make the same message after a crash: its id
// (Nats-Msg-Id, the batch id) is then a JetStream duplicate, and nothing is delivered twice
// (CONTRACT 6.6). Every writer of queued rows in NATS mode assigns through here (the EventQueue:
// engine commits, recoveries), one at a time on this thread, so a batch's rows are consecutive in
// seq.
//
// A batch is published as one message per org (its rows of that org, in order; id `<batch>.<org>`
// when it holds more than one org, else the batch id): a data plane takes or defers an org's events
// by the message (CONTRACT 8: an org over its share of the window leaves its messages in JetStream,
// src/dataplane/sources/jetstream/source.ts), and the split is the same after a crash (the same rows make
// the same messages). A batch is stored (and its rows deleted) once all its messages are.
//
// The seal covers the batch and the time of this publish (not the events'): a data plane drops a
// batch stored long after it was sealed as a replay, and rows published late (NATS was away for
// hours) are sealed when they are published. Stored rows are done with in the engine's next commit
// (`piggyback`: outbox rows deleted, the history's cursor moved past them), or on their own shortly
// after when no commit comes: from then on JetStream is the durable queue. While NATS is away, rows
// wait and the relay tries again. A row the bus cannot carry (over 256 KiB, or refused for its
// size) is set aside (set-aside.ts) and the rows behind it go on.
//
// The outbox table is the truth; the rows a commit wrote are also handed to the relay in memory,
// so that once it has caught up with the table (at start, or after a failure) it publishes them
// without reading them back.
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import type { OutboxRow, PublishedBatch } from '../../store/outbox.ts';
import { encodeHopBatch } from '../bus/hop.ts';
import type { JetStreamPublisher } from '../bus/nats/jetstream-publisher.ts';
import type { Seal } from '../bus/seal.ts';
import { EVENTS_STREAM } from '../bus/nats/jetstream.ts';
import { hopSubject } from '../bus/subjects.ts';
import { systemClock, type Clock, type Timer } from '../domain/clock.ts';
import { errorText } from '../domain/errors.ts';
import { isRecoveryItemId } from '../domain/event-route.ts';
import type { Metrics } from '../metrics.ts';
import { isUnpublishable, oversized, SetAside } from './set-aside.ts';
import { outboxQueue, type RelayQueue } from './relay-queues.ts';

/** Events in one batch at most. */
export const MAX_BATCH_EVENTS = 256;
/** A batch takes no more events once its bodies and routes reach this (an event alone may be up to 256 KiB). */
export const MAX_BATCH_BYTES = 256 * 1024;
/** Batches published at once (each awaits its store acknowledgement). */
const IN_FLIGHT = 8;
/** Rows read from the table at a time (more than a full batch, so a read holds at least one whole batch). */
const TABLE_READ = 4 * MAX_BATCH_EVENTS;
const RETRY_MS = 1000;
/** Stored rows wait at most this long for a commit to delete them in; then they are deleted on their own. */
const PRUNE_ALONE_MS = 25;

/**
 * FAULT INJECTION, for test/system/crash.test.ts only: where a crash test stops the process. Called
 * at the first batch of committed events before publishing any of them ('before-publish': the
 * window between commit and publish), and once JetStream has stored a batch, before its rows are
 * deleted ('after-publish': the window between publish and prune). Inert unless given (the CLI
 * gives one when SVC_FAULT_CRASH_BEFORE_PUBLISH or _AFTER_PUBLISH is set, src/cli/serve.ts).
 */
export type RelayFault = (point: 'before-publish' | 'after-publish') => Promise<void>;

/** Rows of one batch, in seq order. */
interface Batch {
  /** the batch id (Nats-Msg-Id): the row's `batch`, or its event id for a row that is a batch of its own */
  id: string;
  rows: OutboxRow[];
}

const batchOf = (r: OutboxRow): string => r.batch ?? r.event_id;

/** Consecutive rows of the same batch together, in order: the first `max` batches, and the rows they hold. */
function groupRows(rows: readonly OutboxRow[], max: number): { batches: Batch[]; rows: number } {
  const batches: Batch[] = [];
  let n = 0;
  for (const r of rows) {
    const id = batchOf(r);
    const last = batches[batches.length - 1];
    if (last && last.id === id) last.rows.push(r);
    else if (batches.length === max) break;
    else batches.push({ id, rows: [r] });
    n++;
  }
  return { batches, rows: n };
}

export class OutboxRelay {
  private running: Promise<void> | null = null;
  private again = false;
  private closed = false;
  private failing = false;
  private retry: Timer | null = null;
  /** a failure now is the stream's new leader (leaderElected): retry without the delay */
  private retryAtOnce = false;
  /** read the table (at start and after a failure) until caught up; then take the rows handed over */
  private fromTable = true;
  private handed: OutboxRow[] = [];
  /** every row up to this seq is stored (or set aside): the table is read after it */
  private storedUpTo = 0;
  /** every row up to this seq has been mirrored to observers */
  private mirroredUpTo = 0;
  /** the batch new rows join (null: the next row starts one) */
  private open: { id: string; events: number; bytes: number } | null = null;
  /** stored batches whose rows wait to be deleted, and those deleted in the commit under way */
  private prunable: PublishedBatch[] = [];
  private pruning: PublishedBatch[] | null = null;
  private pruneTimer: Timer | null = null;
  private readonly aside: SetAside;

  constructor(
    private readonly db: Db,
    private readonly publisher: JetStreamPublisher,
    private readonly seal: Seal,
    private readonly logger: Logger,
    private readonly metrics: Metrics | null = null,
    /** the time seals carry and the relay's waits run on: the real time (data planes compare it with JetStream's) */
    private readonly clock: Clock = systemClock,
    private readonly fault: RelayFault | null = null,
    /** the table its rows are in: the outbox, or the event history (relay-queues.ts) */
    private readonly queue: RelayQueue = outboxQueue(db),
  ) {
    this.aside = new SetAside(db, logger, metrics);
    this.storedUpTo = queue.storedAtStart();
  }

  /**
   * Nothing committed waits to be published or is being published (rows handed over included), and
   * the table says so: what JetStream stored is done with there too (rows deleted, cursor moved).
   */
  idle(): boolean {
    const publishing = this.running || this.again || this.failing || this.fromTable || this.handed.length > 0;
    return !publishing && !this.prunable.length && !this.pruning;
  }

  /** The first seq not known to be stored: the rows from there on are the queue. */
  unstoredFrom(): number {
    return this.storedUpTo + 1;
  }

  /**
   * The batch an outbox row joins, for a row about to be inserted (its event id and roughly its
   * size: body and route). Called inside the inserting transaction; a row rolled back leaves a batch
   * a little smaller than it could have been, nothing else.
   */
  assign(eventId: string, bytes: number): string {
    const o = this.open;
    if (o && o.events < MAX_BATCH_EVENTS && o.bytes + bytes <= MAX_BATCH_BYTES) {
      o.events++;
      o.bytes += bytes;
      return o.id;
    }
    this.open = { id: eventId, events: 1, bytes };
    return eventId;
  }

  /** Rows a commit just wrote (in order): published from memory once the relay has caught up with the table. */
  handoff(rows: readonly OutboxRow[]): void {
    if (!this.fromTable) for (const r of rows) this.handed.push(r);
    this.kick();
  }

  /** The next batches to publish, oldest first; closes the open batch when they include it (later rows start another). */
  private nextBatches(): Batch[] {
    let batches: Batch[];
    if (!this.fromTable) {
      const taken = groupRows(this.handed, IN_FLIGHT);
      batches = taken.batches;
      this.handed.splice(0, taken.rows);
    } else {
      const rows = this.queue.read(this.storedUpTo, TABLE_READ);
      // caught up: no commit can come between this read and the switch (both run in this turn)
      if (!rows.length) {
        this.fromTable = false;
        return [];
      }
      const taken = groupRows(rows, IN_FLIGHT);
      batches = taken.batches;
      // a full read may have cut its last batch short: that one waits for the next read
      if (taken.rows === rows.length && rows.length === TABLE_READ && batches.length > 1) batches.pop();
    }
    const last = batches[batches.length - 1];
    if (last && this.open?.id === last.id) this.open = null;
    return batches;
  }

  /**
   * SVC_EVENTS has a new leader (after an election on a cluster). What was published while it had
   * none was dropped without an answer: stop waiting for those acknowledgements and publish again
   * now, not after the publish timeout and the retry delay.
   */
  leaderElected(): void {
    if (this.closed) return;
    // the failures this causes (if any publish waits) retry at once
    this.retryAtOnce = this.publisher.abandonPending(`${EVENTS_STREAM} has a new leader; publishing again`) > 0;
    if (this.retry) {
      this.retry.cancel();
      this.retry = null;
      this.retryAtOnce = false;
      this.kick();
    }
  }

  /** Publish what the outbox holds (single flight; runs again if kicked meanwhile). */
  kick(): void {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.run().finally(() => {
      this.running = null;
      if (this.again && !this.closed && !this.retry) this.kick();
    });
  }

  /**
   * One batch as messages, one per org: its rows the bus can carry (the others set aside). Empty
   * when none is left. Each row's body as UTF-8 goes into `bytes` too: the observers' copy of the
   * event (mirror) is sent from the same bytes as the hop message, not encoded a second time.
   */
  private messages(b: Batch, bytes: Map<OutboxRow, Buffer>): Array<{ id: string; rows: OutboxRow[]; body: Buffer }> {
    const byOrg = new Map<string, OutboxRow[]>();
    for (const r of b.rows) {
      const tooBig = oversized(r);
      if (tooBig) this.aside.event(r, tooBig, this.queue.rowsLeave);
      else {
        const rows = byOrg.get(r.org_id);
        if (rows) rows.push(r);
        else byOrg.set(r.org_id, [r]);
      }
    }
    const out: Array<{ id: string; rows: OutboxRow[]; body: Buffer }> = [];
    for (const [org, rows] of byOrg) {
      this.metrics?.hopBatchEvents.observe(rows.length);
      const id = byOrg.size === 1 ? b.id : `${b.id}.${org}`;
      const events = rows.map((r) => {
        const body = Buffer.from(r.body, 'utf8');
        bytes.set(r, body);
        return { id: r.event_id, route: r.route, body };
      });
      out.push({ id, rows, body: encodeHopBatch(events) });
    }
    return out;
  }

  /** A batch's messages: each stored, or refused for its size and then published event by event. Rejects on any other failure. */
  private async publishBatch(parts: ReadonlyArray<{ id: string; rows: OutboxRow[]; body: Buffer }>, now: number): Promise<void> {
    const acks = await Promise.allSettled(parts.map((m) => this.publish(m, now)));
    for (let i = 0; i < parts.length; i++) {
      const ack = acks[i];
      if (ack.status === 'fulfilled') continue;
      if (!isUnpublishable(ack.reason)) throw ack.reason;
    }
    for (let i = 0; i < parts.length; i++) if (acks[i].status === 'rejected') await this.publishAlone(parts[i].rows);
  }

  private publish(msg: { id: string; body: Buffer }, now: number): Promise<void> {
    return this.publisher.publish(hopSubject, msg.body, msg.id, this.seal.sealHop(msg.id, msg.body, now));
  }

  /**
   * A batch refused for its size: each event alone (its event id as the message id, so a crash
   * that makes the batch again splits it the same way), setting aside what is refused even so.
   */
  private async publishAlone(rows: readonly OutboxRow[]): Promise<void> {
    for (const r of rows) {
      const single = { id: r.event_id, body: encodeHopBatch([{ id: r.event_id, route: r.route, body: r.body }]) };
      try {
        await this.publish(single, this.clock.now());
      } catch (err) {
        if (!isUnpublishable(err)) throw err;
        this.aside.event(r, errorText(err), this.queue.rowsLeave);
      }
    }
  }

  private async run(): Promise<void> {
    try {
      do {
        this.again = false;
        for (;;) {
          if (this.closed) return;
          const batches = this.nextBatches();
          if (!batches.length) break;
          await this.fault?.('before-publish');
          const bytes = new Map<OutboxRow, Buffer>();
          const messages = batches.map((b) => this.messages(b, bytes));
          // observers' copies go out with the publish, in the same socket write (one write fewer
          // per round than after the store acknowledgement)
          this.mirror(batches, bytes);
          const now = this.clock.now();
          const acks = await Promise.allSettled(messages.map((m) => this.publishBatch(m, now)));
          // in order: stored (a message refused for its size, each event alone), up to the first other failure
          const stored: Batch[] = [];
          let failure: { reason: unknown } | null = null;
          for (let i = 0; i < batches.length; i++) {
            const ack = acks[i];
            if (ack.status === 'rejected') {
              failure = { reason: ack.reason };
              break;
            }
            stored.push(batches[i]);
          }
          if (stored.length > 0) await this.fault?.('after-publish');
          for (const b of stored) {
            const rows = b.rows;
            this.storedUpTo = rows[rows.length - 1].seq;
            this.prunable.push({ first: rows[0].seq, last: rows[rows.length - 1].seq, batch: rows[0].batch });
          }
          this.schedulePrune();
          if (failure) throw failure.reason;
          if (this.failing) {
            this.failing = false;
            this.logger.warn('publishing events to JetStream again');
          }
        }
      } while (this.again);
    } catch (err) {
      if (!this.failing) this.logger.warn({ err: String(err) }, 'could not publish events to JetStream; they wait in the outbox, retrying');
      this.failing = true;
      // the table has every row not yet stored: start over from it
      this.fromTable = true;
      this.handed = [];
      const delay = this.retryAtOnce ? 0 : RETRY_MS;
      this.retryAtOnce = false;
      this.retry = this.clock.setTimeout(() => {
        this.retry = null;
        this.kick();
      }, delay);
    }
  }

  /**
   * Observers' copy of each event being published (CONTRACT 5.2), once per event while this process
   * runs (a publish tried again does not repeat it; after a restart, rows published again may be);
   * a recovery item repeats an event they saw already.
   */
  private mirror(batches: readonly Batch[], bytes: ReadonlyMap<OutboxRow, Buffer>): void {
    for (const b of batches) {
      for (const r of b.rows) {
        if (r.seq <= this.mirroredUpTo) continue;
        this.mirroredUpTo = r.seq;
        if (isRecoveryItemId(r.event_id)) continue;
        try {
          // a row set aside for its size has no bytes: its copy too is the string
          this.publisher.mirror(r.subject, bytes.get(r) ?? r.body);
        } catch {
          // the connection is closing: observers are best effort
        }
      }
    }
  }

  /**
   * Deleting stored rows rides along in the engine's next commit (one transaction fewer per batch):
   * NATS mode's EventQueue (relay-queues.ts) calls write() inside the transaction and committed() or
   * rolledBack() after.
   */
  readonly piggyback = {
    write: (): void => {
      if (!this.prunable.length || this.pruning) return;
      this.pruning = this.prunable;
      this.prunable = [];
      this.queue.stored(this.pruning);
    },
    committed: (): void => {
      this.pruning = null;
    },
    rolledBack: (): void => {
      if (this.pruning) this.prunable.unshift(...this.pruning);
      this.pruning = null;
    },
  };

  /** Stored rows are deleted on their own if no commit takes them along soon. */
  private schedulePrune(): void {
    if (this.pruneTimer || !this.prunable.length) return;
    this.pruneTimer = this.clock.setTimeout(() => {
      this.pruneTimer = null;
      this.pruneAlone();
    }, PRUNE_ALONE_MS);
  }

  private pruneAlone(): void {
    if (!this.prunable.length) return;
    const batches = this.prunable;
    this.prunable = [];
    try {
      this.db.transaction(() => this.queue.stored(batches)).immediate();
    } catch (err) {
      this.prunable.unshift(...batches);
      if (!this.closed)
        this.logger.warn(
          { err: String(err) },
          'could not record which rows JetStream stored (outbox rows deleted, history cursor moved); will try again',
        );
      this.schedulePrune();
    }
  }

  /** Publish what is committed (unless NATS is away), then stop; what is left waits for the next start. */
  async close(): Promise<void> {
    if (this.running) await this.running;
    if (!this.closed && !this.failing) await this.run();
    this.closed = true;
    this.retry?.cancel();
    this.retry = null;
    this.pruneTimer?.cancel();
    this.pruneTimer = null;
    this.pruneAlone();
  }
}
