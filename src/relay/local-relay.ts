// Embedded mode: the outbox is the durable delivery queue. The relay hands committed rows to the
// in-process data plane while it has room, deletes a row once every attempt it needs has an
// outcome, and records which webhooks a slow row has already had (so that after a crash only the
// attempts in flight are repeated). On start every row left is handed over again, with its progress.
// Plain subscribers of svc.events.> on the in-process bus see each event once as it is handed over.
// An event over 256 KiB (CONTRACT 8) is set aside instead (src/relay/set-aside.ts).
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { deleteOutbox, readOutbox, saveOutboxProgress, type OutboxRow } from '../../store/outbox.ts';
import type { Bus } from '../bus/bus.ts';
import { decodeRoute } from '../domain/route.ts';
import type { DeliveryPipeline, InboundEvent, ProgressStore } from '../dataplane/pipeline.ts';
import type { Metrics } from '../metrics.ts';
import { oversized, SetAside } from './set-aside.ts';

const BATCH = 500;

export class LocalRelay implements ProgressStore {
  private lastSeq = 0;
  private feeding = false;
  private closed = false;
  private readonly held = new Map<string, number>();
  private toDelete: number[] = [];
  private deleteScheduled = false;
  private pipeline: DeliveryPipeline | null = null;
  private readonly aside: SetAside;

  constructor(
    private readonly db: Db,
    private readonly bus: Bus,
    private readonly logger: Logger,
    metrics: Metrics | null = null,
  ) {
    this.aside = new SetAside(db, logger, metrics);
  }

  /** The data plane rows go to (set once, before the first kick). */
  attach(pipeline: DeliveryPipeline): void {
    this.pipeline = pipeline;
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
          p.whenRoom(() => this.kick());
          return;
        }
        const rows = readOutbox(this.db, this.lastSeq, Math.min(room, BATCH));
        if (!rows.length) return;
        for (const row of rows) {
          this.lastSeq = row.seq;
          const tooBig = oversized(row);
          if (tooBig) this.aside.event(row, tooBig);
          else this.hand(p, row);
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
    // a recovery item (CONTRACT 4.5) repeats an event for one webhook: subscribers saw it already
    if (row.progress.length === 0 && !route.recovery) this.mirror(row);
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

  /** Plain subscribers of svc.events.> on the in-process bus (CONTRACT 5.2). */
  private mirror(row: OutboxRow): void {
    try {
      this.bus.publish(row.subject, row.body);
    } catch {
      // the bus is closing
    }
  }

  /**
   * A settled row is deleted in a microtask: before the attempt the pipeline starts in the freed
   * slot gets past its first await, so before that attempt can reach its webhook. A kill therefore
   * finds without a recorded end only attempts in flight (those a restart repeats, CONTRACT 6.6),
   * never a finished one whose delete waited for a later loop turn.
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
    this.toDelete = [];
    if (!seqs.length) return;
    try {
      deleteOutbox(this.db, seqs);
    } catch (err) {
      if (!this.closed) this.logger.warn({ err: String(err) }, 'could not delete delivered outbox rows');
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
    this.flushDeletes();
  }
}
