// Retention on the engine's clock: of the event history and the attempt log (CONTRACT 4.5
// --event-retention), and of the audit log (CONTRACT 2 --audit-retention). What is older than the
// retention is deleted, at start and then every 60th of the retention (at most every hour). Reads
// never return it even before a prune (store/history.ts, src/services/audit.ts filter by the same cut-off).
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { pruneHistory } from '../../store/history.ts';
import { pruneAudit } from '../../store/audit.ts';
import type { Clock, Timer } from '../domain/clock.ts';

const PRUNE_EVERY_MS_MAX = 3_600_000;

/** What a pruner deletes: rows older than a cut-off (ms), how many. */
export interface Kept {
  what: string;
  prune(db: Db, beforeMs: number): number;
}

/** The event history and the attempt log; events from `queuedFrom()` on stay, however old (NATS mode: the relay's queue). */
export const eventHistory = (queuedFrom?: () => number): Kept => ({
  what: 'event history and attempts',
  prune: (db, beforeMs) => pruneHistory(db, beforeMs, queuedFrom?.()),
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
