// Embedded mode: the outbox is the durable delivery queue. The relay hands committed rows to the
// data plane while it has room, deletes a row once every attempt it needs has an outcome, and
// records which webhooks a slow row has already had (so that after a crash only the attempts in
// flight are repeated, CONTRACT 6.6). On start every row left is handed over again, with its
// progress. It runs where the data plane runs: on the delivery thread, through that thread's own
// SQLite connection (src/relay/local-thread.ts), or on the engine's thread for a database that
// cannot have a second connection. Plain subscribers of svc.events.> see each event when it is
// committed, on the engine's thread (src/topology/embedded.ts), not here.
// An event over 256 KiB (CONTRACT 8) is set aside instead (src/relay/set-aside.ts).
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { deleteOutbox, readOutbox, saveOutboxProgress, type OutboxRow } from '../../store/outbox.ts';
import { systemClock, type Clock, type Timer } from '../domain/clock.ts';
import { decodeRoute } from '../domain/route.ts';
import type { DeliveryPipeline, InboundEvent, ProgressStore } from '../dataplane/pipeline.ts';
import { oversized, SetAside, UNPUBLISHABLE } from './set-aside.ts';

const BATCH = 500;
/** A delete the engine's write lock kept out past busy_timeout is tried again this much later. */
const DELETE_RETRY_MS = 100;

export class LocalRelay implements ProgressStore {
  private lastSeq = 0;
  private feeding = false;
  private waitingForRoom = false;
  private closed = false;
  private readonly held = new Map<string, number>();
  private toDelete: number[] = [];
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
  ) {
    this.aside = new SetAside(db, logger, null);
  }

  /** The data plane rows go to (set once, before the first kick). */
  attach(pipeline: DeliveryPipeline): void {
    this.pipeline = pipeline;
  }

  /** Events held by the relay and not yet settled, and deletes not yet written. */
  busy(): boolean {
    return this.held.size > 0 || this.toDelete.length > 0;
  }

  /** Hand over committed rows while the data plane has room. */
  kick(): void {
    const p = this.pipeline;
    if (!p || this.feeding || this.closed) return;
    this.feeding = true;
    try {
      for (;;) {
        const room = p.room();
        if (room === 0) {
          // one listener however many commits are kicked meanwhile
          if (!this.waitingForRoom) {
            this.waitingForRoom = true;
            p.whenRoom(() => {
              this.waitingForRoom = false;
              this.kick();
            });
          }
          return;
        }
        const rows = readOutbox(this.db, this.lastSeq, Math.min(room, BATCH));
        if (!rows.length) return;
        for (const row of rows) {
          this.lastSeq = row.seq;
          const tooBig = oversized(row);
          if (tooBig) {
            if (this.aside.event(row, tooBig)) this.dropped(UNPUBLISHABLE);
          } else this.hand(p, row);
        }
      }
    } finally {
      this.feeding = false;
    }
  }

  private hand(p: DeliveryPipeline, row: OutboxRow): void {
    const route = decodeRoute(row.route);
    if (!route) {
      this.logger.error({ event_id: row.event_id }, 'outbox row without a readable route; dropped');
      this.done(row.seq);
      return;
    }
    this.held.set(row.event_id, row.seq);
    const ev: InboundEvent = {
      id: row.event_id,
      route,
      body: Buffer.from(row.body, 'utf8'),
      done: row.progress,
      settle: () => {
        this.held.delete(row.event_id);
        this.done(row.seq);
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
   * share one delete (one write transaction against the engine's).
   */
  private done(seq: number): void {
    this.toDelete.push(seq);
    if (this.deleteScheduled) return;
    this.deleteScheduled = true;
    queueMicrotask(() => this.flushDeletes());
  }

  private flushDeletes(): void {
    this.deleteScheduled = false;
    const seqs = this.toDelete;
    if (!seqs.length) return;
    try {
      deleteOutbox(this.db, seqs);
      this.toDelete = [];
      this.deleted += seqs.length;
      this.deletes++;
    } catch (err) {
      // SQLITE_BUSY past busy_timeout (the engine held the write lock that long): kept, tried
      // again, so a delivered row is not delivered again after a restart
      this.logger.warn({ err: String(err), rows: seqs.length }, 'could not delete delivered outbox rows; will try again');
      if (this.closed) return;
      this.retryTimer ??= this.clock.setTimeout(() => {
        this.retryTimer = null;
        this.flushDeletes();
      }, DELETE_RETRY_MS);
    }
  }

  /** ProgressStore: which webhooks each of these rows has had. */
  async save(events: ReadonlyArray<{ event: InboundEvent; done: readonly string[] }>): Promise<void> {
    const rows: Array<{ seq: number; done: readonly string[] }> = [];
    for (const e of events) {
      const seq = this.held.get(e.event.id);
      if (seq !== undefined) rows.push({ seq, done: e.done });
    }
    saveOutboxProgress(this.db, rows);
  }

  /** Stop handing over; delete what is done. */
  close(): void {
    this.closed = true;
    this.retryTimer?.cancel();
    this.retryTimer = null;
    this.flushDeletes();
    this.logger.info({ rows_deleted: this.deleted, delete_transactions: this.deletes }, 'outbox relay stopped');
  }
}
