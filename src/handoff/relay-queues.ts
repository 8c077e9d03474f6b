// The two tables an outbox relay (outbox-relay.ts) publishes from, NATS mode:
//  - the outbox: recovery items, and every event when no history is kept (--event-retention 0);
//    a stored batch's rows are deleted;
//  - the event history (migration 17): an emitted event's history row is its queue row too, so an
//    event costs one row, not a history row and an outbox row with its body again (issue 33); a
//    stored batch moves relay_cursor on, and the rows stay as the history.
// Both keep each row's batch, so that the same rows make the same message after a crash.
// NATS mode's EventQueue (relay-event-queue.ts) writes both.
import type { Db } from '../../store/db.ts';
import { deleteOutboxBatches, readOutbox, type OutboxRow, type PublishedBatch } from '../../store/outbox.ts';
import { lastEventSeq, readQueuedEvents, relayCursor, saveRelayCursor } from '../../store/history.ts';
import { eventSubject } from '../bus/subjects.ts';
import type { EventQueue } from './event-queue.ts';

export interface RelayQueue {
  /** every row up to this seq was stored by JetStream before this process started */
  storedAtStart(): number;
  /** rows after a seq, oldest first */
  read(afterSeq: number, limit: number): OutboxRow[];
  /** JetStream stored these batches: done with their rows (in the caller's transaction) */
  stored(batches: readonly PublishedBatch[]): void;
  /** a row set aside leaves the table (the outbox) or stays (the history) */
  readonly rowsLeave: boolean;
}

export function outboxQueue(db: Db): RelayQueue {
  return {
    storedAtStart: () => 0,
    read: (afterSeq, limit) => readOutbox(db, afterSeq, limit),
    stored: (batches) => deleteOutboxBatches(db, batches),
    rowsLeave: true,
  };
}

export function historyQueue(db: Db): RelayQueue {
  return {
    storedAtStart: () => relayCursor(db),
    read: (afterSeq, limit) =>
      readQueuedEvents(db, afterSeq, limit).map((e) => ({
        seq: e.seq,
        event_id: e.event_id,
        org_id: e.org_id,
        subject: eventSubject(e.subject),
        type: e.type,
        body: e.body,
        route: e.route,
        progress: [],
        batch: e.batch,
      })),
    // stored in order (the relay's storedUpTo only moves on): the last batch's last row is the cursor
    stored: (batches) => {
      if (batches.length) saveRelayCursor(db, batches[batches.length - 1].last);
    },
    rowsLeave: false,
  };
}

/**
 * Embedded mode, at start: events a NATS-mode run queued in their history row and JetStream had not
 * stored are moved to the outbox, the queue of this mode (written through its EventQueue, `queue`),
 * and the cursor past them and past every event kept (one transaction). How many. Embedded mode
 * queues nothing in the history (its events have no batch), so the cursor may pass them all: the
 * next start reads only what came after.
 */
export function moveHistoryQueueToOutbox(db: Db, queue: EventQueue): number {
  const history = historyQueue(db);
  const w = queue.open();
  let moved: number;
  try {
    moved = db
      .transaction(() => {
        let after = history.storedAtStart();
        let n = 0;
        for (;;) {
          const rows = history.read(after, 1000);
          if (!rows.length) break;
          for (const r of rows)
            queue.write(
              w,
              { event_id: r.event_id, org_id: r.org_id, subject: r.subject, type: r.type, body: r.body, route: r.route },
              null,
            );
          after = rows[rows.length - 1].seq;
          n += rows.length;
        }
        passEmbeddedEvents(db);
        queue.commit();
        return n;
      })
      .immediate();
  } catch (err) {
    queue.rolledBack();
    throw err;
  }
  queue.committed(w);
  return moved;
}

/**
 * Embedded mode, at a stop: the cursor past every event kept (this mode queues none of them in the
 * history), so that the next start, in either mode, reads only what comes after.
 */
export function passEmbeddedEvents(db: Db): void {
  saveRelayCursor(db, lastEventSeq(db));
}
