// The EventQueue port: where the engine's transaction (src/engine/transaction.ts) puts every event
// it emits and every queue item it enqueues, and what it is told when the transaction commits or
// rolls back. The topology owns it (src/topology/topology.ts `queue`); each runtime has its own:
//  - embedded mode (src/topology/embedded.ts): an outbox row per item (the data plane's queue), and the event's
//    history row too when it is kept; handed to the data plane after the commit;
//  - NATS mode (src/handoff/relay-event-queue.ts): each row's hop batch assigned as it is
//    written, an event kept in the history queued in its history row (no outbox row), and the relays'
//    prune of what JetStream stored riding in the commit; handed to the relays after it.
// The transaction calls `write` once per event or item and never asks which runtime it writes to.
import type { StoredEvent } from '../../store/history.ts';
import type { OutboxRow } from '../../store/outbox.ts';

/** What a queue item is made of: an outbox row before it has a seq, a batch and a progress. */
export type QueueItem = Omit<OutboxRow, 'seq' | 'progress' | 'batch'>;

/** An emitted event as the history keeps it (CONTRACT 4.5): its CloudEvents subject, not its NATS subject. */
export type KeptEvent = Omit<StoredEvent, 'seq'>;

export interface EventQueue {
  /** A transaction opens: what it writes is recorded here until it commits or rolls back. */
  open(): QueueWrites;
  /**
   * Queue `item` in the open transaction `w`; `kept`: the event's history row, kept too, in the same
   * transaction (null: an item not kept, or no history is kept).
   */
  write(w: QueueWrites, item: QueueItem, kept: KeptEvent | null): void;
  /** Inside the transaction, last, before it commits: the writes that ride along in every commit. */
  commit(): void;
  /** The transaction committed: hand on what it queued, in order. */
  committed(w: QueueWrites): void;
  /** The transaction rolled back: nothing it queued exists. */
  rolledBack(): void;
}

/**
 * The rows one transaction queued, in order, in each lane of its queue (a lane: a table rows are
 * queued in, each handed on by itself). A group commit's item that throws drops what it queued:
 * `mark` before it, `undo` after its savepoint rolled back (no object per item).
 */
export class QueueWrites {
  readonly lanes: OutboxRow[][];
  /** each lane's length at the last mark (made at the first: most transactions never mark) */
  private marks: number[] | null = null;

  constructor(lanes: number) {
    this.lanes = [];
    for (let i = 0; i < lanes; i++) this.lanes.push([]);
  }

  mark(): void {
    const marks = (this.marks ??= []);
    for (let i = 0; i < this.lanes.length; i++) marks[i] = this.lanes[i].length;
  }

  undo(): void {
    const marks = this.marks;
    if (marks) for (let i = 0; i < this.lanes.length; i++) this.lanes[i].length = marks[i];
  }
}

/**
 * The row of a queue item once inserted, every field named: a spread of the item makes rows of many
 * shapes, and every read of them after it (the relay's, the data plane's) then misses V8's inline
 * caches (with the workflow row's spread, 12–15 % of the engine's instructions per fact under
 * ingest: BENCHMARKS.md, issue 33 step 11).
 */
export function queuedRow(item: QueueItem, seq: number, batch: string | null): OutboxRow {
  return {
    seq,
    event_id: item.event_id,
    org_id: item.org_id,
    subject: item.subject,
    type: item.type,
    body: item.body,
    route: item.route,
    progress: [],
    batch,
  };
}
