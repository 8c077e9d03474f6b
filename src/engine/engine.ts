import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { insertOutbox, markPublished, unpublished } from '../../store/outbox.ts';
import { jobsToSend, markJobSent } from '../../store/workflows.ts';
import type { Bus } from '../bus/bus.ts';
import { eventSubject, jobSubject } from '../bus/subjects.ts';
import { toCloudEvent } from '../events/cloudevent.ts';
import type { Fact } from '../events/facts.ts';
import type { Metrics } from '../metrics.ts';

/** A unit of work: facts recorded inside it reach the outbox in the same SQLite transaction. */
export interface Tx {
  emit(fact: Fact): void;
  /** ask for the job queue to be looked at after commit */
  jobsChanged(): void;
  /** run after a successful commit */
  afterCommit(fn: () => void): void;
}

export interface EngineDeps {
  db: Db;
  bus: Bus;
  logger: Logger;
  metrics: Metrics;
  urls: () => { source: string; dashboard: string };
}

const JOB_RESEND_MS = 10_000;

/**
 * FAULT INJECTION, for test/crash.test.ts only; inert unless SVC_FAULT_CRASH_BEFORE_PUBLISH=1 is
 * in the environment. Then the first outbox flush that finds committed, unpublished events kills
 * the process with SIGKILL before publishing any of them: the window between commit and publish.
 * It waits 100 ms first so that the answers to producers whose facts are already committed
 * ({ok: true}) reach them, as they would in a real crash just after commit.
 */
async function crashBeforePublishIfAsked(): Promise<void> {
  if (process.env.SVC_FAULT_CRASH_BEFORE_PUBLISH !== '1') return;
  await new Promise((r) => setTimeout(r, 100));
  process.kill(process.pid, 'SIGKILL');
  await new Promise(() => {}); // never resumes
}

/**
 * The engine core: one SQLite transaction per fact (state + outbox), then publication.
 * The outbox is published in order; after a crash, whatever was committed but not yet
 * published is published at start (JetStream dedupes by event id).
 */
export class Engine {
  private current: (Tx & { committed: Array<() => void>; types: string[]; jobs: boolean }) | null = null;
  private flushing: Promise<void> | null = null;
  private flushAgain = false;
  private sendingJobs = false;
  private closed = false;

  constructor(private readonly deps: EngineDeps) {}

  get db(): Db {
    return this.deps.db;
  }

  tx<T>(fn: (t: Tx) => T): T {
    if (this.current) return fn(this.current);
    const committed: Array<() => void> = [];
    const types: string[] = [];
    const t = {
      committed,
      types,
      jobs: false,
      emit: (fact: Fact) => {
        const urls = this.deps.urls();
        const ev = toCloudEvent(fact, { source: urls.source, dashboardUrl: urls.dashboard });
        if (!ev) return;
        insertOutbox(this.deps.db, {
          event_id: ev.id,
          org_id: fact.org_id,
          subject: eventSubject(ev.subject),
          type: ev.type,
          body: JSON.stringify(ev),
        });
        types.push(ev.type);
      },
      jobsChanged: () => {
        t.jobs = true;
      },
      afterCommit: (f: () => void) => {
        committed.push(f);
      },
    };
    this.current = t;
    let result: T;
    try {
      result = this.deps.db.transaction(() => fn(t)).immediate();
    } finally {
      this.current = null;
    }
    for (const type of types) this.deps.metrics.eventsEmitted.inc({ type });
    if (types.length) this.kickOutbox();
    if (t.jobs) this.kickJobs();
    for (const f of committed) {
      try {
        f();
      } catch (err) {
        this.deps.logger.error({ err: String(err) }, 'after-commit hook failed');
      }
    }
    return result;
  }

  /** Publish the outbox in order (single flight; re-runs if kicked while running). */
  kickOutbox(): Promise<void> {
    if (this.flushing) {
      this.flushAgain = true;
      return this.flushing;
    }
    this.flushing = (async () => {
      await Promise.resolve(); // never finish before `this.flushing` is assigned
      try {
        do {
          this.flushAgain = false;
          for (;;) {
            const rows = unpublished(this.deps.db);
            if (!rows.length || this.closed) break;
            await crashBeforePublishIfAsked();
            // The batch goes out back to back on one connection (so it is stored in outbox order)
            // and the acknowledged prefix is marked in one transaction: not a round trip and a
            // commit per event. After a failure the rest is published again (deduped by event id).
            const acks = await Promise.allSettled(rows.map((row) => this.deps.bus.publishEvent(row.subject, row.body, row.event_id)));
            let stored = 0;
            while (stored < rows.length && acks[stored].status === 'fulfilled') stored++;
            markPublished(this.deps.db, rows.slice(0, stored).map((row) => row.seq));
            if (stored < rows.length) throw (acks[stored] as PromiseRejectedResult).reason;
          }
        } while (this.flushAgain && !this.closed);
      } catch (err) {
        this.deps.logger.warn({ err: String(err) }, 'outbox publish failed; will retry');
        setTimeout(() => void this.kickOutbox(), 1000).unref();
      } finally {
        this.flushing = null;
      }
    })();
    return this.flushing;
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

  async close(): Promise<void> {
    if (this.flushing) await this.flushing.catch(() => {});
    this.closed = true;
  }
}
