// Outcomes of one data plane, gathered into batches (every 100 ms, or sooner when many) and sent
// back to the control plane: never a write per attempt on the hot path. A batch that cannot be
// sent is kept and sent again (bounded: past MAX_BUFFERED the oldest are dropped, with a warning).
import type { Logger } from 'pino';
import type { Clock, Timer } from '../domain/clock.ts';
import type { Outcome, OutcomeBatch } from '../domain/outcomes.ts';
import type { OutcomeSink } from './pipeline.ts';

const EVERY_MS = 100;
const MAX_BATCH = 1000;
const MAX_BUFFERED = 50_000;

export class BatchingOutcomeSink implements OutcomeSink {
  private buffer: Outcome[] = [];
  private dropped: Record<string, number> = {};
  private readonly timer: Timer;
  private sending: Promise<void> | null = null;
  private failing = false;

  constructor(
    private readonly worker: string,
    private readonly send: (batch: OutcomeBatch) => Promise<void>,
    private readonly inFlight: () => number,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {
    this.timer = clock.setInterval(() => void this.flush(), EVERY_MS);
  }

  record(o: Outcome): void {
    this.buffer.push(o);
    if (this.buffer.length > MAX_BUFFERED) {
      const lost = this.buffer.length - MAX_BUFFERED;
      this.buffer.splice(0, lost);
      this.logger.warn({ lost }, 'delivery outcomes could not be sent back for a long time; oldest dropped');
    }
    if (this.buffer.length >= MAX_BATCH && !this.sending) void this.flush();
  }

  /** An event taken off the bus and not delivered (counted in svc_events_dropped_total). */
  droppedEvent(reason: string): void {
    this.dropped[reason] = (this.dropped[reason] ?? 0) + 1;
  }

  /** Send what is buffered now (waits for a send under way first). */
  async flush(): Promise<void> {
    while (this.sending) await this.sending;
    if (!this.buffer.length && !Object.keys(this.dropped).length) return;
    const outcomes = this.buffer.splice(0, MAX_BATCH);
    const dropped = this.dropped;
    this.dropped = {};
    const batch: OutcomeBatch = { worker: this.worker, in_flight: this.inFlight(), dropped, outcomes };
    this.sending = this.send(batch).then(
      () => {
        if (this.failing) this.logger.warn('sending delivery outcomes again');
        this.failing = false;
      },
      (err: unknown) => {
        this.buffer.unshift(...outcomes);
        for (const [k, n] of Object.entries(dropped)) this.dropped[k] = (this.dropped[k] ?? 0) + n;
        if (!this.failing) this.logger.warn({ err: String(err) }, 'could not send delivery outcomes; keeping them');
        this.failing = true;
      },
    );
    try {
      await this.sending;
    } finally {
      this.sending = null;
    }
    if (this.buffer.length >= MAX_BATCH && !this.failing) await this.flush();
  }

  close(): void {
    this.timer.cancel();
  }
}
