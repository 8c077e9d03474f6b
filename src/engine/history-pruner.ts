// Retention of the event history and the attempt log (CONTRACT 4.5 --event-retention): what is
// older than the retention on the engine's clock is deleted, at start and then every 60th of the
// retention (at most every hour). Reads
// never return it even before a prune (store/history.ts filters by the same cut-off).
import type { Logger } from 'pino';
import type { Db } from '../../store/db.ts';
import { pruneHistory } from '../../store/history.ts';
import type { Clock, Timer } from '../domain/clock.ts';

const PRUNE_EVERY_MS_MAX = 3_600_000;

export class HistoryPruner {
  private readonly timer: Timer;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly retentionMs: number,
    private readonly logger: Logger,
  ) {
    this.prune();
    this.timer = clock.setInterval(() => this.prune(), Math.max(1000, Math.min(PRUNE_EVERY_MS_MAX, Math.floor(retentionMs / 60))));
  }

  prune(): void {
    try {
      const n = pruneHistory(this.db, this.clock.now() - this.retentionMs);
      if (n > 0) this.logger.info({ rows: n }, 'pruned event history and attempts past the retention');
    } catch (err) {
      this.logger.warn({ err }, 'could not prune the event history; will try again');
    }
  }

  close(): void {
    this.timer.cancel();
  }
}
