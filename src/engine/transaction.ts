// One SQLite transaction per fact: the new state and the events it emits (queued, each with its
// route: in its history row in NATS mode, else in an outbox row) commit together, or not at all.
// Under load, facts arriving together share one transaction (group commit), each in its own
// savepoint so that one that throws rolls back alone.
import type { Db } from '../../store/db.ts';
import { insertOutbox, type OutboxRow } from '../../store/outbox.ts';
import { insertEvent, insertQueuedEvent } from '../../store/history.ts';
import { insertAudit } from '../../store/audit.ts';
import type { AuditEntry } from '../domain/scopes.ts';
import { entityLabels } from '../../store/installs.ts';
import { eventSubject } from '../bus/subjects.ts';
import { isoNow, type Clock } from '../domain/clock.ts';
import { EventTooLargeError } from '../domain/errors.ts';
import { LIMITS } from '../domain/limits.ts';
import type { Fact } from '../domain/facts.ts';
import { encodeRoute } from '../domain/event-route.ts';
import { emit } from '../events/cloudevent.ts';
import type { LabelLookup } from '../events/routing.ts';
import type { Metrics } from '../metrics.ts';

/** A unit of work: facts recorded inside it reach the outbox in the same SQLite transaction. */
export interface Tx {
  /** record a fact: its event joins the outbox in this transaction (and the history) */
  emit(fact: Fact): void;
  /** put one queue item in the outbox in this transaction (an event, or a recovery's item) */
  enqueue(item: QueueItem): void;
  /** the job queue changed: look at it after commit */
  jobsChanged(): void;
  /**
   * Record who made this change (CONTRACT 2, the audit log): in this transaction, so that a change
   * without its audit row, or a row without its change, cannot be committed.
   */
  audit(entry: AuditEntry): void;
  /** run `fn` once this transaction has committed (never if it rolls back) */
  afterCommit(fn: () => void): void;
  /** when this transaction records things (ISO 8601, from the engine's clock) */
  readonly now: string;
}

export interface TransactionDeps {
  db: Db;
  clock: Clock;
  metrics: Metrics;
  urls: () => { source: string; dashboard: string };
  /** the webhook registry version that events emitted now must be matched against */
  registryRev: () => number;
  /** after a commit that wrote outbox rows: the rows, in order (the relay publishes or delivers them) */
  outboxChanged: (rows: OutboxRow[]) => void;
  /** keep each emitted event in the history too (CONTRACT 4.5), in the same transaction */
  keepEvents: boolean;
  /** after a commit that changed the job queue */
  jobsChanged: () => void;
  /** NATS mode: the batch an outbox row joins (src/handoff/outbox-relay.ts assign), given its event id and size */
  outboxBatch?: (eventId: string, bytes: number) => string | null;
  /** work that rides along in every commit (the relay's prune of outbox rows JetStream has stored) */
  piggyback?: Piggyback;
  /**
   * NATS mode: an emitted event's history row is its queue row too (keepEvents; no outbox row): the
   * batch it joins, and after a commit that queued some, the rows in order (the history's relay)
   */
  historyQueue?: HistoryQueue;
}

export interface HistoryQueue {
  batch(eventId: string, bytes: number): string;
  changed(rows: OutboxRow[]): void;
}

/**
 * Writes that need no transaction of their own: done inside the next commit instead (`write`, in
 * the transaction, last), and known done once it committed (`committed`) or undone (`rolledBack`).
 */
export interface Piggyback {
  write(): void;
  committed(): void;
  rolledBack(): void;
}

/** What a queue item is made of: an outbox row before it has a seq, a batch and a progress. */
export type QueueItem = Omit<OutboxRow, 'seq' | 'progress' | 'batch'>;

interface OpenTx extends Tx {
  types: string[];
  rows: OutboxRow[];
  /** events queued in their history row (historyQueue) */
  queued: OutboxRow[];
  jobs: boolean;
  after: Array<() => void>;
}

/**
 * The row of a queue item once inserted, every field named: a spread of the item makes rows of many
 * shapes, and every read of them after it (the relay's, the data plane's) then misses V8's inline
 * caches (with the workflow row's spread, 12–15 % of the engine's instructions per fact under
 * ingest: BENCHMARKS.md, issue 33 step 11).
 */
function queuedRow(item: QueueItem, seq: number, batch: string | null): OutboxRow {
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

/** Per item of a group commit: its result, or the error that rolled back its part alone. */
export type BatchResult<R> = { ok: true; value: R } | { ok: false; error: unknown };

export class Transactions {
  private current: OpenTx | null = null;
  private readonly labels: LabelLookup;

  constructor(private readonly deps: TransactionDeps) {
    const db = deps.db;
    this.labels = {
      install: (org, id) => entityLabels(db, org, 'install', id),
      component: (org, id) => entityLabels(db, org, 'component', id),
      action: (org, id) => entityLabels(db, org, 'action', id),
    };
  }

  private open(): OpenTx {
    const t: OpenTx = {
      types: [],
      rows: [],
      queued: [],
      jobs: false,
      after: [],
      now: isoNow(this.deps.clock),
      emit: (fact: Fact) => {
        const urls = this.deps.urls();
        const ev = emit(fact, { source: urls.source, dashboardUrl: urls.dashboard, labels: this.labels, rev: this.deps.registryRev() });
        if (!ev) return;
        const route = encodeRoute(ev.route);
        // CONTRACT 8: an event the bus could not carry is refused with the fact that makes it (the
        // transaction, or the fact's savepoint, rolls back): never stored, kept or set aside
        const bytes =
          (ev.body.length + route.length) * 3 <= LIMITS.eventBytes
            ? 0
            : Buffer.byteLength(ev.body, 'utf8') + Buffer.byteLength(route, 'utf8');
        if (bytes > LIMITS.eventBytes) throw new EventTooLargeError(ev.type, bytes, LIMITS.eventBytes);
        t.types.push(ev.type);
        const item = { event_id: ev.id, org_id: fact.org_id, subject: eventSubject(ev.subject), type: ev.type, body: ev.body, route };
        if (!this.deps.keepEvents) return t.enqueue(item);
        const kept = {
          event_id: ev.id,
          org_id: fact.org_id,
          type: ev.type,
          subject: ev.subject,
          body: ev.body,
          route,
          created_ms: this.deps.clock.now(),
        };
        const queue = this.deps.historyQueue;
        if (queue) {
          const batch = queue.batch(ev.id, ev.body.length + route.length);
          const seq = insertQueuedEvent(this.deps.db, kept, batch);
          // an event of this id kept already (not queued again): queued in the outbox instead, as without a history
          if (seq !== null) t.queued.push(queuedRow(item, seq, batch));
          else t.enqueue(item);
          return;
        }
        t.enqueue(item);
        insertEvent(this.deps.db, kept);
      },
      // the one place an outbox row is written: its batch assigned, handed on after the commit
      enqueue: (item: QueueItem) => {
        const batch = this.deps.outboxBatch?.(item.event_id, item.body.length + item.route.length) ?? null;
        const seq = insertOutbox(this.deps.db, item, batch);
        t.rows.push(queuedRow(item, seq, batch));
      },
      jobsChanged: () => {
        t.jobs = true;
      },
      audit: (entry: AuditEntry) => insertAudit(this.deps.db, entry, { iso: t.now, ms: Date.parse(t.now) }),
      afterCommit: (fn: () => void) => {
        t.after.push(fn);
      },
    };
    return t;
  }

  private committed(t: OpenTx): void {
    for (const type of t.types) this.deps.metrics.eventsEmitted.inc({ type });
    if (t.rows.length) this.deps.outboxChanged(t.rows);
    if (t.queued.length) this.deps.historyQueue?.changed(t.queued);
    if (t.jobs) this.deps.jobsChanged();
    for (const fn of t.after.splice(0)) fn();
  }

  /** Run `fn` after the open transaction commits (dropped if it rolls back); at once when none is open. */
  afterCommit(fn: () => void): void {
    if (this.current) this.current.after.push(fn);
    else fn();
  }

  /** Run fn in one transaction (joining the open one when called inside it). */
  run<T>(fn: (t: Tx) => T): T {
    if (this.current) return fn(this.current);
    const t = this.open();
    const result = this.immediate(t, () => fn(t));
    this.committed(t);
    return result;
  }

  /**
   * `body` in one IMMEDIATE transaction open as `t`, the piggyback riding along: its rows written
   * inside, then told whether they were rolled back or committed.
   */
  private immediate<T>(t: OpenTx, body: () => T): T {
    this.current = t;
    const ride = this.deps.piggyback;
    let result: T;
    try {
      result = this.deps.db
        .transaction(() => {
          const r = body();
          ride?.write();
          return r;
        })
        .immediate();
    } catch (err) {
      ride?.rolledBack();
      throw err;
    } finally {
      this.current = null;
    }
    ride?.committed();
    return result;
  }

  /**
   * Group commit: fn for every item in ONE transaction. Results come back in order once everything
   * is committed (a caller answers each producer only then). Items that throw are rolled back
   * alone: the group is first tried as it is (the common case, no savepoints); if an item throws,
   * the whole attempt is undone and the group runs again with each item in its own savepoint.
   */
  batch<I, R>(items: readonly I[], fn: (t: Tx, item: I) => R): Array<BatchResult<R>> {
    if (this.current) throw new Error('a group commit inside a transaction');
    const db = this.deps.db;
    const attempt = (isolated: boolean): { t: OpenTx; results: Array<BatchResult<R>> } => {
      const t = this.open();
      const results: Array<BatchResult<R>> = [];
      this.immediate(t, () => {
        for (const item of items) {
          if (!isolated) {
            results.push({ ok: true, value: fn(t, item) });
            continue;
          }
          const marks = { types: t.types.length, rows: t.rows.length, queued: t.queued.length, jobs: t.jobs, after: t.after.length };
          try {
            results.push({ ok: true, value: db.transaction(() => fn(t, item))() });
          } catch (error) {
            t.types.length = marks.types;
            t.rows.length = marks.rows;
            t.queued.length = marks.queued;
            t.jobs = marks.jobs;
            t.after.length = marks.after;
            results.push({ ok: false, error });
          }
        }
      });
      return { t, results };
    };
    let done: { t: OpenTx; results: Array<BatchResult<R>> };
    try {
      done = attempt(false);
    } catch {
      done = attempt(true);
    }
    this.committed(done.t);
    return done.results;
  }
}
