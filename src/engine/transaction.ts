// One SQLite transaction per fact: the new state and the events it emits (queued, each with its
// route, by the topology's EventQueue: src/handoff/event-queue.ts) commit together, or not at all.
// Under load, facts arriving together share one transaction (group commit), each in its own
// savepoint so that one that throws rolls back alone.
import type { Db } from '../../store/db.ts';
import { insertAudit } from '../../store/audit.ts';
import { nextOrderSequence } from '../../store/order-sequences.ts';
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
import type { EventQueue, KeptEvent, QueueItem, QueueWrites } from '../handoff/event-queue.ts';

export type { QueueItem } from '../handoff/event-queue.ts';

/** A unit of work: facts recorded inside it reach the queue in the same SQLite transaction. */
export interface Tx {
  /** record a fact: its event joins the queue in this transaction (and the history, when kept) */
  emit(fact: Fact): void;
  /** put one queue item in the queue in this transaction (a recovery's item) */
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
  /** --base-url (the events' `dataschema` is under it), the events' `source`, the dashboard's URL */
  urls: () => { base: string; source: string; dashboard: string };
  /** the webhook registry version that events emitted now must be matched against */
  registryRev: () => number;
  /**
   * where emitted events and queue items go, in the transaction (the topology's: an outbox row, or
   * in NATS mode a history row that is its queue row), and what is handed on after each commit
   */
  queue: EventQueue;
  /** keep each emitted event in the history too (CONTRACT 4.5), in the same transaction */
  keepEvents: boolean;
  /** after a commit that changed the job queue */
  jobsChanged: () => void;
}

interface OpenTx extends Tx {
  types: string[];
  /** what this transaction queued (the queue's record, handed back to it) */
  writes: QueueWrites;
  jobs: boolean;
  after: Array<() => void>;
}

/** Per item of a group commit: its result, or the error that rolled back its part alone. */
export type BatchResult<R> = { ok: true; value: R } | { ok: false; error: unknown };

export class Transactions {
  private current: OpenTx | null = null;
  private readonly labels: LabelLookup;
  private readonly queue: EventQueue;
  /** the next sequence of an ordering key, in the open transaction (CONTRACT 10.1) */
  private readonly sequence: (orgId: string, orderKey: string) => number;

  constructor(private readonly deps: TransactionDeps) {
    const db = deps.db;
    this.queue = deps.queue;
    this.sequence = (orgId, orderKey) => nextOrderSequence(db, orgId, orderKey);
    this.labels = {
      install: (org, id) => entityLabels(db, org, 'install', id),
      component: (org, id) => entityLabels(db, org, 'component', id),
      action: (org, id) => entityLabels(db, org, 'action', id),
    };
  }

  private open(): OpenTx {
    const t: OpenTx = {
      types: [],
      writes: this.queue.open(),
      jobs: false,
      after: [],
      now: isoNow(this.deps.clock),
      emit: (fact: Fact) => this.record(t, fact),
      // with `emit`, the one way into the queue: written in this transaction, handed on after its commit
      enqueue: (item: QueueItem) => this.queue.write(t.writes, item, null),
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

  /**
   * `fact`'s event, queued in `t` (and kept in the history, when events are kept). A method, not the
   * body of the closure `emit`: V8 inlines differently around a small closure, and with this body in
   * it the ingest path ran about 4 % more instructions per fact (bench/ingest-instructions.ts).
   */
  private record(t: OpenTx, fact: Fact): void {
    const urls = this.deps.urls();
    const ev = emit(fact, {
      source: urls.source,
      baseUrl: urls.base,
      dashboardUrl: urls.dashboard,
      labels: this.labels,
      rev: this.deps.registryRev(),
      sequence: this.sequence,
    });
    if (!ev) return;
    const route = encodeRoute(ev.route);
    // CONTRACT 8: an event the bus could not carry is refused with the fact that makes it (the
    // transaction, or the fact's savepoint, rolls back): never stored, kept or set aside
    const bytes =
      (ev.body.length + route.length) * 3 <= LIMITS.eventBytes ? 0 : Buffer.byteLength(ev.body, 'utf8') + Buffer.byteLength(route, 'utf8');
    if (bytes > LIMITS.eventBytes) throw new EventTooLargeError(ev.type, bytes, LIMITS.eventBytes);
    t.types.push(ev.type);
    const item = { event_id: ev.id, org_id: fact.org_id, subject: eventSubject(ev.subject), type: ev.type, body: ev.body, route };
    const kept: KeptEvent | null = this.deps.keepEvents
      ? {
          event_id: ev.id,
          org_id: fact.org_id,
          type: ev.type,
          subject: ev.subject,
          body: ev.body,
          route,
          created_ms: this.deps.clock.now(),
          order_key: ev.orderKey,
          sequence: ev.sequence,
        }
      : null;
    this.queue.write(t.writes, item, kept);
  }

  private committed(t: OpenTx): void {
    for (const type of t.types) this.deps.metrics.eventsEmitted.inc({ type });
    this.queue.committed(t.writes);
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
   * `body` in one IMMEDIATE transaction open as `t`, what rides along in the queue's commits written
   * inside, last; the queue is told if it rolled back (and by `committed`, once it committed).
   */
  private immediate<T>(t: OpenTx, body: () => T): T {
    this.current = t;
    const queue = this.queue;
    try {
      return this.deps.db
        .transaction(() => {
          const r = body();
          queue.commit();
          return r;
        })
        .immediate();
    } catch (err) {
      queue.rolledBack();
      throw err;
    } finally {
      this.current = null;
    }
  }

  /**
   * Group commit: fn for every item in ONE transaction. Results come back in order once everything
   * is committed (a caller answers each producer only then). Items that throw are rolled back
   * alone: the group is first tried as it is (the common case, no savepoints); if an item throws,
   * the whole attempt is undone and the group runs again with each item in its own savepoint.
   * `last`, if given, runs inside the same transaction after every item, with their results (what
   * records how far a stream of items was applied: src/ingest/fact-stream.ts).
   */
  batch<I, R>(items: readonly I[], fn: (t: Tx, item: I) => R, last?: (results: Array<BatchResult<R>>) => void): Array<BatchResult<R>> {
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
          const marks = { types: t.types.length, jobs: t.jobs, after: t.after.length };
          t.writes.mark();
          try {
            results.push({ ok: true, value: db.transaction(() => fn(t, item))() });
          } catch (error) {
            t.types.length = marks.types;
            t.writes.undo();
            t.jobs = marks.jobs;
            t.after.length = marks.after;
            results.push({ ok: false, error });
          }
        }
        last?.(results);
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
