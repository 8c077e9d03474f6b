// Outcomes of one data plane, gathered into batches (every 100 ms, or sooner when many) and sent
// back to the control plane: never a write per attempt on the hot path. A batch that cannot be
// sent is sent again as it was, with the same id (the control plane applies a batch id once, so a
// send whose answer was lost counts once), before anything newer; what comes meanwhile waits in
// the buffer (bounded: past MAX_BUFFERED the oldest are dropped, with a warning).
import type { Logger } from 'pino';
import type { Clock, Timer } from '../domain/clock.ts';
import type { BacklogReport, DeliveryOutcome, OutcomeBatch } from './outcome.ts';

const EVERY_MS = 100;
const NO_BACKLOG: BacklogReport = { backlogged: [], caughtUp: [] };
const MAX_BATCH = 1000;
const MAX_BUFFERED = 50_000;
/**
 * The kept exchanges (request and response, at most about 13 KiB each: src/delivery/exchange-record.ts)
 * of one batch, at most this many bytes (a batch stays well under NATS's max_payload); a batch goes
 * as soon as this many wait.
 */
const MAX_BATCH_EXCHANGE_BYTES = 256 * 1024;
/**
 * Kept exchanges waiting here, at most this many bytes: past it (the control plane not answering)
 * new outcomes go without theirs, so that memory stays bounded (CONTRACT 8).
 */
const MAX_BUFFERED_EXCHANGE_BYTES = 16 * 1024 * 1024;

/** A data plane's outcome sink (the pipeline's `OutcomeSink`, met by shape: this folder imports nothing above it). */
export class BatchingOutcomeSink {
  private buffer: DeliveryOutcome[] = [];
  /** the length of the buffered outcomes' kept exchanges */
  private exchangeBytes = 0;
  private dropped: Record<string, number> = {};
  /** a batch whose send failed: sent again first */
  private unsent: OutcomeBatch | null = null;
  private seq = 0;
  private readonly timer: Timer;
  private sending: Promise<void> | null = null;
  private failing = false;
  /** a batch goes now even with no outcomes in it (an org's backlog ended) */
  private soon = false;

  constructor(
    private readonly worker: string,
    private readonly send: (batch: OutcomeBatch) => Promise<void>,
    private readonly inFlight: () => number,
    clock: Clock,
    private readonly logger: Logger,
    /** the orgs whose deliveries queue in this data plane, and those that no longer do, told with each batch */
    private readonly backlog: () => BacklogReport = () => NO_BACKLOG,
  ) {
    this.timer = clock.setInterval(() => void this.flush(), EVERY_MS);
  }

  record(o: DeliveryOutcome): void {
    if (o.exchange) {
      if (this.exchangeBytes + o.exchange.length > MAX_BUFFERED_EXCHANGE_BYTES) o.exchange = undefined;
      else this.exchangeBytes += o.exchange.length;
    }
    this.buffer.push(o);
    if (this.buffer.length > MAX_BUFFERED) {
      const lost = this.buffer.length - MAX_BUFFERED;
      for (const gone of this.buffer.splice(0, lost)) this.exchangeBytes -= gone.exchange?.length ?? 0;
      this.logger.warn({ lost }, 'delivery outcomes could not be sent back for a long time; oldest dropped');
    }
    if (this.full() && !this.sending) void this.flush();
  }

  /** A batch's worth waits. */
  private full(): boolean {
    return this.buffer.length >= MAX_BATCH || this.exchangeBytes >= MAX_BATCH_EXCHANGE_BYTES;
  }

  /** The next batch's outcomes: at most MAX_BATCH, and their exchanges at most MAX_BATCH_EXCHANGE_BYTES (one at least). */
  private takeBatch(): DeliveryOutcome[] {
    let n = 0;
    let bytes = 0;
    while (n < this.buffer.length && n < MAX_BATCH) {
      const len = this.buffer[n].exchange?.length ?? 0;
      if (n > 0 && bytes + len > MAX_BATCH_EXCHANGE_BYTES) break;
      bytes += len;
      n++;
    }
    this.exchangeBytes -= bytes;
    return this.buffer.splice(0, n);
  }

  /** Nothing buffered, being sent or waiting to be sent again: every outcome (and drop) recorded has been sent. */
  idle(): boolean {
    return !this.buffer.length && !this.sending && !this.unsent && !Object.keys(this.dropped).length;
  }

  /** Events taken off the bus and not delivered (counted in svc_events_dropped_total). */
  droppedEvent(reason: string, events = 1): void {
    this.dropped[reason] = (this.dropped[reason] ?? 0) + events;
  }

  /**
   * An org this data plane said was backlogged no longer is: the control plane holds its facts
   * meanwhile (src/ingest/ingest.ts), so this is told in a batch now, not at the next interval.
   */
  caughtUp(): void {
    this.soon = true;
    void this.flush();
  }

  /** Send what is buffered now (waits for a send under way first). */
  async flush(): Promise<void> {
    while (this.sending) await this.sending;
    let batch = this.unsent;
    if (!batch) {
      if (!this.buffer.length && !Object.keys(this.dropped).length && !this.soon) return;
      this.soon = false;
      const dropped = this.dropped;
      this.dropped = {};
      const { backlogged, caughtUp } = this.backlog();
      batch = {
        id: `${this.worker}.${(++this.seq).toString(36)}`,
        sent_at: 0,
        worker: this.worker,
        in_flight: this.inFlight(),
        dropped,
        outcomes: this.takeBatch(),
        ...(backlogged.length ? { backlogged } : {}),
        ...(caughtUp.length ? { caught_up: caughtUp } : {}),
      };
    }
    const sent = batch;
    this.sending = this.send(sent).then(
      () => {
        this.unsent = null;
        if (this.failing) this.logger.warn('sending delivery outcomes again');
        this.failing = false;
      },
      (err: unknown) => {
        this.unsent = sent;
        if (!this.failing) this.logger.warn({ err }, 'could not send delivery outcomes; keeping them');
        this.failing = true;
      },
    );
    try {
      await this.sending;
    } finally {
      this.sending = null;
    }
    if (this.full() && !this.failing) await this.flush();
  }

  close(): void {
    this.timer.cancel();
  }
}
