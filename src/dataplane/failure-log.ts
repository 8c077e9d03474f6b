// Failed attempts in the log (CONTRACT 6.5 spirit, issue 12): one JSON line per failed attempt with
// webhook_id, event id, type, outcome, status code, duration and the host only (never the path,
// query or a secret). When failures come by the thousand, a line every few seconds sums them up
// instead of a flood.
import type { Logger } from 'pino';
import type { Clock } from '../domain/clock.ts';
import type { Outcome } from '../domain/outcomes.ts';

/** Lines written at most per window before the rest are only counted. */
const BURST = 20;
const WINDOW_MS = 10_000;

export class FailureLog {
  private windowStart = 0;
  private written = 0;
  private suppressed = new Map<string, number>();
  private suppressedTotal = 0;

  constructor(
    private readonly logger: Logger,
    private readonly clock: Clock,
  ) {}

  failed(o: Outcome, host: string): void {
    const now = this.clock.now();
    if (now - this.windowStart >= WINDOW_MS) {
      this.flush();
      this.windowStart = now;
      this.written = 0;
    }
    if (this.written < BURST) {
      this.written++;
      this.logger.warn(
        { webhook_id: o.webhook_id, event_id: o.event_id, type: o.type, outcome: 'failure', status: o.status, error: o.error, duration_ms: o.duration_ms, host },
        'webhook delivery failed',
      );
      return;
    }
    this.suppressedTotal++;
    this.suppressed.set(o.webhook_id, (this.suppressed.get(o.webhook_id) ?? 0) + 1);
  }

  /** Write the summary of what was only counted, if anything. */
  flush(): void {
    if (this.suppressedTotal === 0) return;
    const top = [...this.suppressed.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 10)
      .map(([webhook_id, failures]) => ({ webhook_id, failures }));
    this.logger.warn(
      { failures: this.suppressedTotal, webhooks: this.suppressed.size, top, window_ms: WINDOW_MS },
      'webhook deliveries failed (summary; individual lines suppressed)',
    );
    this.suppressed = new Map();
    this.suppressedTotal = 0;
  }
}
