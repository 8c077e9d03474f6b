// NATS mode: the outbox relay. Publishes committed events to the SVC_EVENTS stream in order, in
// batches (back to back on one connection, so they are stored in outbox order), each with its
// route and the engine's seal in headers and its id as Nats-Msg-Id (JetStream drops a re-publish
// after a crash as a duplicate). The seal covers the time of this publish (not the event's): a
// data plane drops an event stored long after it was sealed as a replay, and a row published late
// (NATS was away for hours) is sealed when it is published. A row JetStream has stored is deleted: from then on JetStream is
// the durable queue. While NATS is away, rows wait and the relay tries again. A row the bus cannot
// carry (over 256 KiB, or refused for its size) is set aside (src/relay/set-aside.ts) and the rows
// behind it go on.
//
// The outbox table is the truth; the rows a commit wrote are also handed to the relay in memory,
// so that once it has caught up with the table (at start, or after a failure) it publishes them
// without reading them back.
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { deleteOutbox, readOutbox, type OutboxRow } from '../../store/outbox.ts';
import type { JetStreamPublisher } from '../bus/jetstream-publisher.ts';
import type { Seal } from '../bus/seal.ts';
import { systemClock, type Clock } from '../domain/clock.ts';
import { errorText } from '../domain/errors.ts';
import type { Metrics } from '../metrics.ts';
import { isUnpublishable, oversized, SetAside } from './set-aside.ts';

const BATCH = 500;
const RETRY_MS = 1000;

/**
 * FAULT INJECTION, for test/system/crash.test.ts only; inert unless one of these is in the environment:
 * SVC_FAULT_CRASH_BEFORE_PUBLISH=1 kills the process (SIGKILL) at the first batch of committed
 * events, before publishing any of them (the window between commit and publish);
 * SVC_FAULT_CRASH_AFTER_PUBLISH=1 kills it once JetStream has stored the first batch, before the
 * rows are deleted (the window between publish and prune). Each waits 100 ms first so that the
 * answers to producers whose facts are already committed ({ok: true}) reach them.
 */
async function crashIfAsked(point: 'BEFORE' | 'AFTER'): Promise<void> {
  if (process.env[`SVC_FAULT_CRASH_${point}_PUBLISH`] !== '1') return;
  await new Promise((r) => setTimeout(r, 100));
  process.kill(process.pid, 'SIGKILL');
  await new Promise(() => {}); // never resumes
}

export class JetStreamRelay {
  private running: Promise<void> | null = null;
  private again = false;
  private closed = false;
  private failing = false;
  private retry: NodeJS.Timeout | null = null;
  /** read the table (at start and after a failure) until caught up; then take the rows handed over */
  private fromTable = true;
  private handed: OutboxRow[] = [];
  private readonly aside: SetAside;

  constructor(
    private readonly db: Db,
    private readonly publisher: JetStreamPublisher,
    private readonly seal: Seal,
    private readonly logger: Logger,
    metrics: Metrics | null = null,
    /** the time seals carry: the real time (data planes compare it with JetStream's) */
    private readonly clock: Clock = systemClock,
  ) {
    this.aside = new SetAside(db, logger, metrics);
  }

  /** Rows a commit just wrote (in order): published from memory once the relay has caught up with the table. */
  handoff(rows: readonly OutboxRow[]): void {
    if (!this.fromTable) for (const r of rows) this.handed.push(r);
    this.kick();
  }

  /**
   * Rows were written outside the engine's commits (a recovery's items, CONTRACT 4.5): read the
   * table again rather than holding them all in memory. Rows handed over and not yet published are
   * in the table too; a row published twice is dropped by JetStream as a duplicate (its msg id).
   */
  reread(): void {
    this.fromTable = true;
    this.handed = [];
    this.kick();
  }

  /** The next rows to publish, oldest first. */
  private nextRows(): OutboxRow[] {
    if (!this.fromTable) return this.handed.splice(0, BATCH);
    const rows = readOutbox(this.db, 0, BATCH);
    // caught up: no commit can come between this read and the switch (both run in this turn)
    if (!rows.length) this.fromTable = false;
    return rows;
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

  private async run(): Promise<void> {
    try {
      do {
        this.again = false;
        for (;;) {
          if (this.closed) return;
          const rows = this.nextRows();
          if (!rows.length) break;
          await crashIfAsked('BEFORE');
          const tried: OutboxRow[] = [];
          for (const r of rows) {
            const tooBig = oversized(r);
            if (tooBig) this.aside.event(r, tooBig);
            else tried.push(r);
          }
          const now = this.clock.now();
          const acks = await Promise.allSettled(
            tried.map((r) => this.publisher.publish(r.subject, r.body, r.event_id, r.route, this.seal.sealEvent(r.event_id, r.route, r.body, now))),
          );
          // in order: stored, or refused for its size (set aside), up to the first other failure
          const stored: number[] = [];
          let failure: { reason: unknown } | null = null;
          for (let i = 0; i < tried.length && !failure; i++) {
            const ack = acks[i];
            if (ack.status === 'fulfilled') stored.push(tried[i].seq);
            else if (isUnpublishable(ack.reason)) this.aside.event(tried[i], errorText(ack.reason));
            else failure = { reason: ack.reason };
          }
          if (stored.length > 0) await crashIfAsked('AFTER');
          deleteOutbox(this.db, stored);
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
      this.retry = setTimeout(() => {
        this.retry = null;
        this.kick();
      }, RETRY_MS);
      this.retry.unref();
    }
  }

  /** Publish what is committed (unless NATS is away), then stop; what is left waits for the next start. */
  async close(): Promise<void> {
    if (this.running) await this.running;
    if (!this.closed && !this.failing) await this.run();
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    this.retry = null;
  }
}
