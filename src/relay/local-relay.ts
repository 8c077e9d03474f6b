// Embedded mode: the outbox is the durable delivery queue. The relay hands committed rows to the
// data plane while it has room, records a row as delivered once every attempt it needs has an
// outcome, and records which webhooks a slow row has already had (so that after a crash only the
// attempts in flight are repeated, CONTRACT 6.6). On start every row left is handed over again,
// with its progress. It runs where the data plane runs: on the delivery thread, through that
// thread's own SQLite connection and its own ledger file (src/relay/local-thread.ts: delivered
// marks and progress there, delivered rows deleted from the outbox in batches), or on the engine's
// thread (--delivery-threads 0, a ':memory:' database: rows deleted and progress written at once).
// Plain subscribers of svc.events.> see each event when it is committed, on the engine's thread
// (src/topology/embedded.ts), not here.
// An event over 256 KiB (CONTRACT 8) is set aside instead (src/relay/set-aside.ts).
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { deleteOutbox, readOutbox, saveOutboxProgress, type DeliveryLedger, type OutboxRow } from '../../store/outbox.ts';
import { systemClock, type Clock, type Timer } from '../domain/clock.ts';
import { decodeRoute } from '../domain/event-route.ts';
import type { OutcomeBatch } from '../outcomes/outcome.ts';
import { WebhookRegistry } from '../dispatch/registry.ts';
import type { DeliveryPipeline, InboundEvent, ProgressStore } from '../dataplane/pipeline.ts';
import { startLocalDataPlane, type DeliveryLimits } from '../dataplane/data-plane.ts';
import type { RegistryChange } from './local-delivery.ts';
import { oversized, SetAside, UNPUBLISHABLE } from './set-aside.ts';

const BATCH = 500;
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

export class LocalRelay implements ProgressStore {
  private lastSeq = 0;
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

  /** Events held by the relay and not yet settled, and deletes not yet written. */
  busy(): boolean {
    return this.held.size > 0 || this.toDelete.length > 0 || this.toPrune.length > 0;
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
          if (this.delivered.has(row.seq)) continue;
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
        deleteOutbox(this.db, marks.map((m) => m.seq));
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
    this.logger.info({ rows_deleted: this.deleted, delete_transactions: this.deletes }, 'outbox relay stopped');
  }
}

/** Embedded mode's data plane, on the thread that calls this: its registry, the relay over `db` and the pipeline the relay feeds. */
export interface LocalDelivery {
  readonly relay: LocalRelay;
  /** a webhook changed (false: older than the version held) */
  apply(change: RegistryChange): boolean;
  /** nothing held, in flight, or waiting to be recorded */
  idle(): boolean;
  /** SIGTERM (CONTRACT 6.6): finish the attempts in flight, leave the rest in the outbox */
  drain(): Promise<void>;
}

export function startLocalDelivery(o: {
  db: Db;
  /** the delivery thread's own records (null: on the engine's thread, written to the outbox itself) */
  ledger: DeliveryLedger | null;
  outcomes: (batch: OutcomeBatch) => void;
  limits: DeliveryLimits;
  logger: Logger;
}): LocalDelivery {
  const registry = new WebhookRegistry();
  const relay = new LocalRelay(o.db, o.logger, (reason) => plane.dropped(reason), systemClock, o.ledger);
  const plane = startLocalDataPlane({ registry, progress: relay, outcomes: o.outcomes, limits: o.limits, clock: systemClock, logger: o.logger });
  relay.attach(plane.pipeline);
  return {
    relay,
    apply: (c) => (c.entry ? registry.upsert(c.entry, c.v) : registry.remove(c.orgId, c.webhookId, c.v)),
    idle: () => plane.pipeline.held() === 0 && plane.pipeline.inFlight() === 0 && !relay.busy(),
    async drain() {
      await plane.drain();
      relay.close();
    },
  };
}
