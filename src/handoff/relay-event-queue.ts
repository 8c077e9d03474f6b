// NATS mode's EventQueue (event-queue.ts): the engine's transaction writes each event through it,
// and it queues the event for one of the two outbox relays (outbox-relay.ts) over the tables of
// relay-queues.ts: in its history row when the event is kept, else in an outbox row.
import type { Db } from '../../store/db.ts';
import { insertOutbox } from '../../store/outbox.ts';
import { insertQueuedEvent } from '../../store/history.ts';
import { type EventQueue, QueueWrites, queuedRow } from './event-queue.ts';
import type { OutboxRelay } from './outbox-relay.ts';

/** The lanes of NATS mode's QueueWrites: rows of each are handed to the relay over that table. */
const OUTBOX = 0;
const HISTORY = 1;

/**
 * NATS mode's EventQueue over the two relays: every row gets its hop batch as it is written (the
 * relay's `assign`); an event kept in the history is queued in its history row (no outbox row),
 * anything else (a recovery's item, an event when no history is kept) in an outbox row; the relays'
 * prune of what JetStream stored rides in each commit (`piggyback`); after a commit, each relay is
 * handed its rows in order once `handing()` (the relays have started: until then they read the table).
 */
export function relayEventQueue(
  db: Db,
  outbox: Pick<OutboxRelay, 'assign' | 'handoff' | 'piggyback'>,
  history: Pick<OutboxRelay, 'assign' | 'handoff' | 'piggyback'>,
  handing: () => boolean,
): EventQueue {
  return {
    open: () => new QueueWrites(2),
    write(w, item, kept) {
      const bytes = item.body.length + item.route.length;
      if (kept) {
        const batch = history.assign(item.event_id, bytes);
        const seq = insertQueuedEvent(db, kept, batch);
        if (seq !== null) {
          w.lanes[HISTORY].push(queuedRow(item, seq, batch));
          return;
        }
        // an event of this id kept already (not queued again): queued in the outbox instead, as without a history
      }
      const batch = outbox.assign(item.event_id, bytes);
      w.lanes[OUTBOX].push(queuedRow(item, insertOutbox(db, item, batch), batch));
    },
    commit() {
      outbox.piggyback.write();
      history.piggyback.write();
    },
    committed(w) {
      outbox.piggyback.committed();
      history.piggyback.committed();
      const rows = w.lanes[OUTBOX];
      const kept = w.lanes[HISTORY];
      if (!handing()) return;
      if (rows.length) outbox.handoff(rows);
      if (kept.length) history.handoff(kept);
    },
    rolledBack() {
      outbox.piggyback.rolledBack();
      history.piggyback.rolledBack();
    },
  };
}
