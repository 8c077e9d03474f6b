// Retention on the engine's clock: of the event history, the attempt log and the late refusals of
// durable ingest (CONTRACT 4.5 and 9, --event-retention), and of the audit log (CONTRACT 2 --audit-retention). What is older than the
// retention is deleted, at start and then every 60th of the retention (at most every hour). Reads
// never return it even before a prune (store/history.ts, src/services/audit.ts filter by the same cut-off).
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import {
  countOrgEvents,
  eventsPerOrgBetween,
  lastEventSeq,
  oldestOrgEvent,
  orgsWithEvents,
  pruneHistory,
  pruneOrgOldest,
} from '../../store/history.ts';
import { pruneAudit } from '../../store/audit.ts';
import { pruneIngestRejections } from '../../store/ingest-rejections.ts';
import type { Clock, Timer } from '../domain/clock.ts';

const PRUNE_EVERY_MS_MAX = 3_600_000;

/** What a pruner deletes: rows older than a cut-off (ms), how many. */
export interface Kept {
  what: string;
  prune(db: Db, beforeMs: number): number;
}

/**
 * The event history and the attempt log; events from `queuedFrom()` on stay, however old (NATS mode:
 * the relay's queue). The ingest refusals are kept for the same time (CONTRACT 9).
 */
export const eventHistory = (queuedFrom?: () => number): Kept => ({
  what: 'event history, attempts and ingest rejections',
  prune: (db, beforeMs) => pruneHistory(db, beforeMs, queuedFrom?.()) + pruneIngestRejections(db, beforeMs),
});
export const AUDIT_LOG: Kept = { what: 'audit log', prune: pruneAudit };

export class HistoryPruner {
  private readonly timer: Timer;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly retentionMs: number,
    private readonly logger: Logger,
    private readonly kept: Kept = eventHistory(),
  ) {
    this.prune();
    this.timer = clock.setInterval(() => this.prune(), Math.max(1000, Math.min(PRUNE_EVERY_MS_MAX, Math.floor(retentionMs / 60))));
  }

  prune(): void {
    try {
      const n = this.kept.prune(this.db, this.clock.now() - this.retentionMs);
      if (n > 0) this.logger.info({ rows: n }, `pruned ${this.kept.what} past the retention`);
    } catch (err) {
      this.logger.warn({ err }, `could not prune the ${this.kept.what}; will try again`);
    }
  }

  close(): void {
    this.timer.cancel();
  }
}

/** How often the per-org quota of events is enforced (and at start). */
export const QUOTA_EVERY_MS = 5_000;
/** Events deleted per turn (500 events and their attempts: about 2-3 ms, measured on 120,000 events with an attempt each). */
export const QUOTA_DELETE_STEP = 500;
/** Events counted per turn on the (org_id, seq) index (about 2-4 ms), and orgs looked up (0.05 ms each). */
const QUOTA_COUNT_STEP = 50_000;
const QUOTA_ORGS_STEP = 500;
/** Seqs of new events counted per turn, on the key (rows are read: about 4 ms). */
const QUOTA_SCAN_STEP = 10_000;

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** What the quota knows of an org: its events up to the cursor, and its oldest one. */
interface OrgCount {
  n: number;
  oldest: number;
}

/**
 * --max-events-per-org (CONTRACT 8): past it an org's oldest events are pruned first, counted
 * svc_events_pruned_total{reason="quota"}; other orgs' events are never touched. At start and every
 * QUOTA_EVERY_MS of the engine's clock, in turns of a few ms (setImmediate between them).
 *
 * Counting an org's history on each pass would walk its whole index (about 55 ms at 2,000,000), so
 * the count is kept: each org's events up to a cursor, counted once at start on the index, then
 * the new events since the cursor on each pass (a range of the key). The only other deletions of
 * events are retention's, which cut the whole history before a seq: an org whose oldest event is
 * no longer the one it had lost some of its rows that way, and is counted again before any of its
 * rows are pruned. A count is never low, so no more than the org's excess is ever deleted.
 */
export class EventQuota {
  private readonly timer: Timer;
  private readonly counts = new Map<string, OrgCount>();
  /** events up to this seq are counted; -1: not counted yet */
  private cursor = -1;
  private running: Promise<number> | null = null;
  private closed = false;

  constructor(
    private readonly db: Db,
    clock: Clock,
    private readonly maxPerOrg: number,
    private readonly logger: Logger,
    private readonly pruned: (n: number) => void,
    private readonly queuedFrom?: () => number,
    everyMs = QUOTA_EVERY_MS,
  ) {
    void this.run();
    this.timer = clock.setInterval(() => void this.run(), everyMs);
  }

  /** A pass, unless one is under way (then that one): how many events it pruned. */
  run(): Promise<number> {
    if (this.closed || this.maxPerOrg <= 0) return Promise.resolve(0);
    this.running ??= this.pass()
      .catch((err) => {
        if (!this.closed) this.logger.warn({ err }, 'could not prune the events past --max-events-per-org; will try again');
        return 0;
      })
      .finally(() => (this.running = null));
    return this.running;
  }

  /** The pass under way, if any, once it is done. */
  async settled(): Promise<void> {
    await this.running;
  }

  close(): void {
    this.closed = true;
    this.timer.cancel();
  }

  private async pass(): Promise<number> {
    await this.count();
    let total = 0;
    for (const [orgId, c] of [...this.counts]) {
      while (!this.closed && c.n > this.maxPerOrg) {
        const oldest = oldestOrgEvent(this.db, orgId);
        if (oldest === null) {
          this.counts.delete(orgId);
          break;
        }
        if (oldest !== c.oldest) {
          // retention took some of its rows: count it again
          await this.recount(orgId, c);
          continue;
        }
        const r = pruneOrgOldest(this.db, orgId, Math.min(QUOTA_DELETE_STEP, c.n - this.maxPerOrg), this.queuedFrom?.());
        c.n -= r.events;
        total += r.events;
        if (r.events > 0) this.pruned(r.events);
        if (r.oldest === null) this.counts.delete(orgId);
        else c.oldest = r.oldest;
        await turn();
        if (r.events === 0) break; // the rest is still the relay's queue
      }
      if (this.closed) break;
    }
    if (total > 0)
      this.logger.info({ rows: total, max_per_org: this.maxPerOrg }, 'pruned the oldest events of orgs past --max-events-per-org');
    return total;
  }

  /** Bring the counts up to the newest event. */
  private async count(): Promise<void> {
    const upTo = lastEventSeq(this.db);
    if (this.cursor < 0) {
      // at start: each org's events on the index
      let after = '';
      for (;;) {
        const orgs = orgsWithEvents(this.db, after, QUOTA_ORGS_STEP);
        await turn();
        for (const orgId of orgs) {
          if (this.closed) return;
          const c: OrgCount = { n: 0, oldest: 0 };
          await this.recount(orgId, c, upTo);
          if (c.n > 0) this.counts.set(orgId, c);
        }
        if (orgs.length < QUOTA_ORGS_STEP || this.closed) break;
        after = orgs[orgs.length - 1]!;
      }
      this.cursor = upTo;
      return;
    }
    while (this.cursor < upTo && !this.closed) {
      const to = Math.min(upTo, this.cursor + QUOTA_SCAN_STEP);
      for (const r of eventsPerOrgBetween(this.db, this.cursor, to)) {
        const c = this.counts.get(r.org_id);
        if (c) c.n += r.n;
        else this.counts.set(r.org_id, { n: r.n, oldest: r.first });
      }
      this.cursor = to;
      await turn();
    }
  }

  /** Count an org's events up to the cursor again (`upTo`), on the index, until its oldest stays the same throughout. */
  private async recount(orgId: string, c: OrgCount, upTo = this.cursor): Promise<void> {
    while (!this.closed) {
      const oldest = oldestOrgEvent(this.db, orgId);
      let n = 0;
      let after = 0;
      for (;;) {
        const step = countOrgEvents(this.db, orgId, after, upTo, QUOTA_COUNT_STEP);
        n += step.n;
        await turn();
        if (step.n < QUOTA_COUNT_STEP || step.last === null || this.closed) break;
        after = step.last;
      }
      if (this.closed || oldestOrgEvent(this.db, orgId) === oldest) {
        c.n = n;
        c.oldest = oldest ?? 0;
        return;
      }
    }
  }
}
