import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { insertOutbox } from '../../store/outbox.ts';
import { entityLabels } from '../../store/installs.ts';
import { jobsToSend, markJobSent } from '../../store/workflows.ts';
import type { Bus } from '../bus/bus.ts';
import { eventSubject, jobSubject } from '../bus/subjects.ts';
import { encodeRoute } from '../domain/route.ts';
import { emit } from '../events/cloudevent.ts';
import type { LabelLookup } from '../events/route.ts';
import type { Fact } from '../domain/facts.ts';
import type { Metrics } from '../metrics.ts';

/** A unit of work: facts recorded inside it reach the outbox in the same SQLite transaction. */
export interface Tx {
  emit(fact: Fact): void;
  /** ask for the job queue to be looked at after commit */
  jobsChanged(): void;
}

export interface EngineDeps {
  db: Db;
  bus: Bus;
  logger: Logger;
  metrics: Metrics;
  urls: () => { source: string; dashboard: string };
  /** the webhook registry revision that events emitted now must be matched against */
  registryRev: () => number;
  /** called after a commit that wrote outbox rows (the relay publishes or delivers them) */
  outboxChanged: () => void;
}

const JOB_RESEND_MS = 10_000;

interface OpenTx extends Tx {
  types: string[];
  jobs: boolean;
}

/** Per item of a group commit: its result, or the error that rolled back its part alone. */
export type BatchResult<R> = { ok: true; value: R } | { ok: false; error: unknown };

/**
 * The engine core: one SQLite transaction per fact (state + outbox rows with their routes), or one
 * per group of facts under load (group commit: each fact in its own savepoint). What the outbox
 * holds is published or delivered by a relay (src/relay/); the engine never talks to the data plane.
 */
export class Engine {
  private current: OpenTx | null = null;
  private sendingJobs = false;
  private closed = false;
  private readonly labels: LabelLookup;

  constructor(private readonly deps: EngineDeps) {
    const db = deps.db;
    this.labels = {
      install: (org, id) => entityLabels(db, org, 'install', id),
      component: (org, id) => entityLabels(db, org, 'component', id),
      action: (org, id) => entityLabels(db, org, 'action', id),
    };
  }

  get db(): Db {
    return this.deps.db;
  }

  private open(): OpenTx {
    const t: OpenTx = {
      types: [],
      jobs: false,
      emit: (fact: Fact) => {
        const urls = this.deps.urls();
        const ev = emit(fact, { source: urls.source, dashboardUrl: urls.dashboard, labels: this.labels, rev: this.deps.registryRev() });
        if (!ev) return;
        insertOutbox(this.deps.db, {
          event_id: ev.id,
          org_id: fact.org_id,
          subject: eventSubject(ev.subject),
          type: ev.type,
          body: ev.body,
          route: encodeRoute(ev.route),
        });
        t.types.push(ev.type);
      },
      jobsChanged: () => {
        t.jobs = true;
      },
    };
    return t;
  }

  private committed(t: OpenTx): void {
    for (const type of t.types) this.deps.metrics.eventsEmitted.inc({ type });
    if (t.types.length) this.deps.outboxChanged();
    if (t.jobs) this.kickJobs();
  }

  /** Run fn in one transaction (joining the open one when called inside it). */
  tx<T>(fn: (t: Tx) => T): T {
    if (this.current) return fn(this.current);
    const t = this.open();
    this.current = t;
    let result: T;
    try {
      result = this.deps.db.transaction(() => fn(t)).immediate();
    } finally {
      this.current = null;
    }
    this.committed(t);
    return result;
  }

  /**
   * Group commit: run fn for every item in ONE transaction, each item in its own savepoint, so
   * that an item that throws rolls back alone. Results come back in order once everything is
   * committed (a caller answers each producer only then).
   */
  batch<I, R>(items: readonly I[], fn: (t: Tx, item: I) => R): Array<BatchResult<R>> {
    if (this.current) throw new Error('engine.batch inside a transaction');
    const t = this.open();
    this.current = t;
    const db = this.deps.db;
    const results: Array<BatchResult<R>> = [];
    try {
      db.transaction(() => {
        for (const item of items) {
          const mark = t.types.length;
          const jobs = t.jobs;
          try {
            results.push({ ok: true, value: db.transaction(() => fn(t, item))() });
          } catch (error) {
            t.types.length = mark;
            t.jobs = jobs;
            results.push({ ok: false, error });
          }
        }
      }).immediate();
    } finally {
      this.current = null;
    }
    this.committed(t);
    return results;
  }

  /** Send queued jobs, and re-send jobs not started within 10 s (same job_id). */
  kickJobs(): void {
    if (this.sendingJobs || this.closed) return;
    this.sendingJobs = true;
    try {
      for (const job of jobsToSend(this.deps.db, JOB_RESEND_MS)) {
        this.deps.bus.publish(jobSubject(job.org_id, job.runner_id), JSON.stringify(job.payload));
        markJobSent(this.deps.db, job.job_id);
      }
    } catch (err) {
      this.deps.logger.warn({ err: String(err) }, 'sending jobs failed');
    } finally {
      this.sendingJobs = false;
    }
  }

  close(): void {
    this.closed = true;
  }
}
