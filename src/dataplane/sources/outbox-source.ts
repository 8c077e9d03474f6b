// Embedded mode's event source: the outbox is the durable delivery queue, and this reads it into
// the pipeline (as sources/jetstream/source.ts reads JetStream in NATS mode). It hands committed
// rows to the pipeline while it has room, records a row as delivered once every attempt it needs
// has an outcome, and records which webhooks a slow row has already had (so that after a crash
// only the attempts in flight are repeated, CONTRACT 6.6). On start every row left is handed over
// again, with its progress. It runs where the data plane runs: on the delivery thread, through that
// thread's own SQLite connection and its own ledger file (src/dataplane/outbox-thread-entry.ts:
// delivered marks and progress there, delivered rows deleted from the outbox in batches), or on
// the engine's thread (--delivery-threads 0, a ':memory:' database: rows deleted and progress
// written at once). Plain subscribers of svc.events.> see each event when it is committed, on the
// engine's thread (src/topology/embedded.ts), not here.
// An event over 256 KiB (CONTRACT 8) is set aside instead (src/handoff/set-aside.ts).
//
// Rows are read per org, round robin over the orgs with rows waiting, each org's as many as the
// pipeline takes of it now (roomFor: its fair share of the window, CONTRACT 8): one org's backlog
// (a burst, a receiver that hangs) waits in the outbox, and another org's rows committed after it
// are handed over at once. Which orgs have rows waiting is learnt from the rows committed since the
// last look (one pass over them), each org's rows are read through the index outbox_org.
import type { Logger } from 'pino';
import type { Db } from '../../../store/db.ts';
import {
  deleteOutbox,
  outboxOrgsAfter,
  readOrgOutbox,
  saveOutboxProgress,
  type DeliveryLedger,
  type OutboxRow,
} from '../../../store/outbox.ts';
import { systemClock, type Clock, type Timer } from '../../domain/clock.ts';
import { decodeRoute } from '../../domain/event-route.ts';
import { oversized, SetAside, UNPUBLISHABLE } from '../../handoff/set-aside.ts';
import type { DeliveryPipeline, InboundEvent, ProgressStore } from '../pipeline.ts';

/** Rows of one org read at a time (its turn of the round robin). */
const ORG_BATCH = 256;
/** A delete the engine's write lock kept out past busy_timeout is tried again this much later. */
const DELETE_RETRY_MS = 100;
/** With a delivered ledger: how often delivered rows are deleted from the outbox (one write each time). */
const PRUNE_MS = 100;
/** Prunes that found the engine's write lock taken before one waits for it (busy_timeout). */
const PRUNE_PATIENCE = 10;
/** busy_timeout of every connection (store/db.ts) */
const BUSY_TIMEOUT_MS = 5000;

function isBusy(err: unknown): boolean {
  return typeof err === 'object' && err !== null && String((err as { code?: unknown }).code ?? '').startsWith('SQLITE_BUSY');
}

/** An org with rows not yet handed over: the last row handed over (or passed), and the last row known of it. */
interface OrgCursor {
  read: number;
  last: number;
}

export class OutboxSource implements ProgressStore {
  /** every row up to this seq is known (its org is in `orgs`, or was handed over already) */
  private known = 0;
  /** each org's cursor (kept when it has caught up: rows it read beyond `known` are not read again) */
  private readonly cursors = new Map<string, OrgCursor>();
  /** orgs with rows waiting, in round-robin order (a Set's order: an org's turn moves it to the end) */
  private readonly waiting = new Set<string>();
  private feeding = false;
  private waitingForRoom = false;
  private closed = false;
  private readonly held = new Map<string, number>();
  private toDelete: Array<{ seq: number; event_id: string }> = [];
  /** with a ledger: rows marked delivered, not yet deleted from the outbox (skipped when read) */
  private readonly delivered = new Set<number>();
  private toPrune: number[] = [];
  private pruneTimer: Timer | null = null;
  private pruneMisses = 0;
  /** with a ledger: the progress a previous thread recorded for rows left in the outbox */
  private progressLeft = new Map<number, { event_id: string; done: string[] }>();
  private deleteScheduled = false;
  private retryTimer: Timer | null = null;
  private pipeline: DeliveryPipeline | null = null;
  private readonly aside: SetAside;
  /** rows deleted, and in how many write transactions (logged at close: the batching, measured) */
  private deleted = 0;
  private deletes = 0;

  constructor(
    private readonly db: Db,
    private readonly logger: Logger,
    /** an event taken off the queue and not delivered (svc_events_dropped_total, counted by the control plane) */
    private readonly dropped: (reason: string) => void,
    private readonly clock: Clock = systemClock,
    /**
     * The delivery thread's own records (store/outbox.ts DeliveryLedger): a settled row is marked
     * delivered there at once and progress is kept there, without the engine's write lock; delivered
     * rows are deleted from the outbox in batches. Null: both written to the outbox itself (one
     * connection, nothing to contend with).
     */
    private readonly ledger: DeliveryLedger | null = null,
  ) {
    this.aside = new SetAside(db, logger, null);
    if (ledger) {
      // what the previous thread left: rows delivered and not yet deleted are never handed over again
      const left = ledger.load(db);
      for (const seq of left.delivered) {
        this.delivered.add(seq);
        this.toPrune.push(seq);
      }
      this.progressLeft = left.progress;
      if (this.toPrune.length) this.schedulePrune();
    }
  }

  /** The data plane rows go to (set once, before the first kick). */
  attach(pipeline: DeliveryPipeline): void {
    this.pipeline = pipeline;
  }

  /** Events held by the source and not yet settled, and deletes not yet written. */
  busy(): boolean {
    return this.held.size > 0 || this.toDelete.length > 0 || this.toPrune.length > 0;
  }

  /** Hand over committed rows while the data plane has room: per org, round robin, each within its share. */
  kick(): void {
    const p = this.pipeline;
    if (!p || this.feeding || this.closed) return;
    this.feeding = true;
    try {
      for (;;) {
        if (p.room() === 0) return this.waitForRoom(p);
        this.learnOrgs();
        let handed = 0;
        let held = false;
        // one turn of every org with rows waiting (walked over a copy: a turn reorders the set)
        for (const org of [...this.waiting]) {
          const c = this.cursors.get(org)!;
          const room = p.roomFor(org);
          if (room === 0) {
            held = true;
            continue;
          }
          const rows = readOrgOutbox(this.db, org, c.read, Math.min(room, ORG_BATCH));
          for (const row of rows) {
            c.read = row.seq;
            if (this.delivered.has(row.seq)) continue;
            const tooBig = oversized(row);
            if (tooBig) {
              if (this.aside.event(row, tooBig)) this.dropped(UNPUBLISHABLE);
            } else this.hand(p, row);
          }
          handed += rows.length;
          this.waiting.delete(org);
          // caught up with what is known of it (later rows make it wait again); else its next turn after the others'
          if (rows.length === Math.min(room, ORG_BATCH) && c.read < c.last) this.waiting.add(org);
        }
        if (handed === 0) {
          if (held) this.waitForRoom(p);
          return;
        }
      }
    } finally {
      this.feeding = false;
    }
  }

  /** The orgs of the rows committed since the last look, and the last row of each. */
  private learnOrgs(): void {
    const from = this.known;
    for (const { org_id, last } of outboxOrgsAfter(this.db, from)) {
      const c = this.cursors.get(org_id);
      // an org new here: its rows up to `from` were none (each row up to it was known, and its org's)
      if (c) c.last = Math.max(c.last, last);
      else this.cursors.set(org_id, { read: from, last });
      if (last > (c?.read ?? from)) this.waiting.add(org_id);
      this.known = Math.max(this.known, last);
    }
  }

  /** One listener however many commits are kicked meanwhile. */
  private waitForRoom(p: DeliveryPipeline): void {
    if (this.waitingForRoom) return;
    this.waitingForRoom = true;
    p.whenRoom(() => {
      this.waitingForRoom = false;
      this.kick();
    });
  }

  private hand(p: DeliveryPipeline, row: OutboxRow): void {
    const route = decodeRoute(row.route);
    if (!route) {
      this.logger.error({ event_id: row.event_id }, 'outbox row without a readable route; dropped');
      this.done(row.seq, row.event_id);
      return;
    }
    this.held.set(row.event_id, row.seq);
    const left = this.progressLeft.get(row.seq);
    if (left) this.progressLeft.delete(row.seq);
    const ev: InboundEvent = {
      id: row.event_id,
      route,
      body: Buffer.from(row.body, 'utf8'),
      done: left && left.event_id === row.event_id ? [...new Set([...row.progress, ...left.done])] : row.progress,
      settle: () => {
        this.held.delete(row.event_id);
        this.done(row.seq, row.event_id);
      },
      release: () => {
        this.held.delete(row.event_id);
      },
    };
    p.accept(ev);
  }

  /**
   * A settled row is deleted in a microtask: before the attempt the pipeline starts in the freed
   * slot gets past its first await, so before that attempt can reach its webhook. A kill therefore
   * finds without a recorded end only attempts in flight (those a restart repeats, CONTRACT 6.6),
   * never a finished one whose delete waited for a later loop turn. Rows settled in the same turn
   * share one delete (one write transaction against the engine's), or with a ledger one mark
   * there (no wait for the engine) and a delete from the outbox later.
   */
  private done(seq: number, eventId: string): void {
    this.toDelete.push({ seq, event_id: eventId });
    if (this.deleteScheduled) return;
    this.deleteScheduled = true;
    queueMicrotask(() => this.flushDeletes());
  }

  private flushDeletes(): void {
    this.deleteScheduled = false;
    const marks = this.toDelete;
    if (!marks.length) return;
    try {
      if (this.ledger) {
        this.ledger.mark(marks);
        for (const m of marks) {
          this.delivered.add(m.seq);
          this.toPrune.push(m.seq);
        }
        this.schedulePrune();
      } else {
        deleteOutbox(
          this.db,
          marks.map((m) => m.seq),
        );
        this.deleted += marks.length;
        this.deletes++;
      }
      this.toDelete = [];
    } catch (err) {
      // SQLITE_BUSY past busy_timeout (the engine held the write lock that long): kept, tried
      // again, so a delivered row is not delivered again after a restart
      this.logger.warn({ err: String(err), rows: marks.length }, 'could not record delivered outbox rows; will try again');
      if (this.closed) return;
      this.retryTimer ??= this.clock.setTimeout(() => {
        this.retryTimer = null;
        this.flushDeletes();
      }, DELETE_RETRY_MS);
    }
  }

  private schedulePrune(): void {
    this.pruneTimer ??= this.clock.setTimeout(() => {
      this.pruneTimer = null;
      this.prune();
    }, PRUNE_MS);
  }

  /**
   * Delete the rows marked delivered from the outbox: one write of the database for all of them.
   * The rows are marked delivered already, so their delete can wait: it does not wait for the
   * engine's write lock (which would stop this thread's deliveries meanwhile) but tries again at
   * the next prune, and waits only after PRUNE_PATIENCE misses in a row, or when closing.
   */
  private prune(wait = this.pruneMisses >= PRUNE_PATIENCE): void {
    const seqs = this.toPrune;
    if (!seqs.length || !this.ledger) return;
    if (!wait) this.db.pragma('busy_timeout = 0');
    try {
      this.ledger.prune(this.db, seqs);
      this.toPrune = [];
      for (const seq of seqs) this.delivered.delete(seq);
      this.deleted += seqs.length;
      this.deletes++;
      this.pruneMisses = 0;
    } catch (err) {
      // kept marked (so never handed over again): deleted at the next prune, or after a restart
      if (!wait && isBusy(err)) this.pruneMisses++;
      else this.logger.warn({ err: String(err), rows: seqs.length }, 'could not delete delivered outbox rows; will try again');
      if (!this.closed) this.schedulePrune();
    } finally {
      if (!wait) this.db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }
  }

  /** ProgressStore: which webhooks each of these rows has had. */
  async save(events: ReadonlyArray<{ event: InboundEvent; done: readonly string[] }>): Promise<void> {
    const rows: Array<{ seq: number; event_id: string; done: readonly string[] }> = [];
    for (const e of events) {
      const seq = this.held.get(e.event.id);
      if (seq !== undefined) rows.push({ seq, event_id: e.event.id, done: e.done });
    }
    if (this.ledger) this.ledger.saveProgress(rows);
    else saveOutboxProgress(this.db, rows);
  }

  /** Stop handing over; delete what is done. */
  close(): void {
    this.closed = true;
    this.retryTimer?.cancel();
    this.retryTimer = null;
    this.flushDeletes();
    this.pruneTimer?.cancel();
    this.pruneTimer = null;
    this.prune(true);
    this.logger.info({ rows_deleted: this.deleted, delete_transactions: this.deletes }, 'outbox source stopped');
  }
}
