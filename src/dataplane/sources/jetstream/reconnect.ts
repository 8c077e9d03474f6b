// What a data plane keeps across a lost connection to NATS. A nats-server restart (CONTRACT 6.6:
// afterwards only attempts in flight when it died are made again). A nats-server killed with kill -9
// comes back with JetStream state seconds old (measured on 2.9: acks and deliveries of up to ~4 s
// before the kill forgotten): it hands out again, as new deliveries (delivery count 1), events this
// plane still holds and events it settled and acked, to this plane or another. So the plane keeps
// what it knows across the reconnect:
//  - batches it settled (acked) in the last minute: handed out again here, they are acked at once;
//  - at the reconnect, before pulling again, it re-signals `working()` for what it holds and writes
//    progress records (KV svc_progress, key = batch id) naming itself as the holder of each batch it
//    holds, and every batch it settled from ACK_RISK_MS before the disconnect on as settled; then it
//    waits RECONNECT_GRACE_MS, so that every plane has written its records before any pulls;
//  - for SUSPECT_MS after that, every batch handed out is looked up in svc_progress (not only
//    redeliveries): settled elsewhere → acked; held by another plane (recently marked) → nak'd
//    with a delay (its holder's `working()` keeps it from coming back; if the holder died it comes
//    back and is attempted with what the record says was done); else attempted minus what was done.
//
// This plane remembers what it settled for longer than the replay window too (at most MAX_SETTLED
// ids): a nats-server restart's duplicate tracking forgets acked messages (./source.ts, replays).
import type { Logger } from 'pino';
import type { JsMsg } from '@nats-io/jetstream';
import { sleep, type Clock } from '../../../domain/clock.ts';
import { EVENT_ACK_WAIT_MS } from '../../../bus/nats/jetstream.ts';
import type { DeliveryPipeline } from '../../pipeline.ts';
import type { HeldBatch, KvProgress, ProgressRecord } from './progress.ts';

/** Batches settled here are remembered at least this long (and at most MAX_SETTLED of them), to ack them again. */
const SETTLED_MEMORY_MS = 60_000;
const MAX_SETTLED = 100_000;
/** Acks sent this long before a disconnect may be forgotten by a restarted nats-server (measured: ~4 s). */
export const ACK_RISK_MS = EVENT_ACK_WAIT_MS;
/** After a reconnect, no pulling for this long: every plane writes its records first (reconnects are 1 s ± 0.25 s apart). */
export const RECONNECT_GRACE_MS = 2000;
/** Writing the records after a reconnect holds pulling up this long at most. */
const MARK_MAX_MS = 10_000;
/** After a reconnect, batches handed out are looked up in svc_progress for this long. */
export const SUSPECT_MS = 2 * EVENT_ACK_WAIT_MS;

export interface ReconnectMemoryOptions {
  /** this data plane (named as the holder in progress records) */
  workerId: string;
  progress: KvProgress;
  pipeline: Pick<DeliveryPipeline, 'attempted'>;
  clock: Clock;
  logger: Logger;
  /** the replay window: settled batches are remembered longer than it */
  replayWindowMs: number;
  /** the source is stopping: records not yet written are given up */
  stopped(): boolean;
}

/** Batches held by the source (and copies of them), as reconnected() claims them. */
export type HeldBatches = ReadonlyMap<string, { batch: HeldBatch }>;

export class ReconnectMemory {
  /** batches settled (acked) here lately, oldest first, and when */
  private readonly settled = new Map<string, number>();
  /** while disconnected (and the grace after): pulling waits for this */
  private gate: { promise: Promise<void>; open(): void } | null = null;
  private disconnectedAt: number | null = null;
  private connection = 0;
  private suspectUntil = 0;
  /** since the last summary: batches acked again (settled here or elsewhere), deferred (held elsewhere) */
  private readonly counts = { reacked: 0, settledElsewhere: 0, heldElsewhere: 0 };
  /** how long settled batches are remembered: longer than the replay window (see the header) */
  private readonly settledMemoryMs: number;

  constructor(private readonly o: ReconnectMemoryOptions) {
    this.settledMemoryMs = Math.max(SETTLED_MEMORY_MS, o.replayWindowMs + EVENT_ACK_WAIT_MS);
  }

  /** Counts disconnects and reconnects: a batch handed out under an earlier value is not taken. */
  get epoch(): number {
    return this.connection;
  }

  /** While disconnected (and the grace after): what pulling waits for; null when it may pull. */
  get paused(): Promise<void> | null {
    return this.gate?.promise ?? null;
  }

  /** Pulling waits no longer (the source stops). */
  unpause(): void {
    this.gate?.open();
  }

  /** This plane settled (acked) the batch now. */
  settledHere(id: string): void {
    this.settled.set(id, this.o.clock.now());
  }

  /** A batch handed out that this plane settled lately: acked again at once (true). */
  ackIfSettledHere(id: string, m: JsMsg): boolean {
    if (!this.settled.has(id)) return false;
    this.counts.reacked++;
    m.ack();
    return true;
  }

  /** Batches handed out now are looked up in svc_progress, redelivered or not (a reconnect was lately). */
  get suspect(): boolean {
    return this.o.clock.now() < this.suspectUntil;
  }

  /**
   * What svc_progress says of a batch handed out (taken in connection `epoch`): null when nothing
   * (or it could not be read: every webhook is attempted); undefined when the batch is dealt with
   * here (settled elsewhere: acked; held by another plane: nak'd) or the connection was lost meanwhile.
   */
  async lookUp(id: string, m: JsMsg, epoch: number): Promise<ProgressRecord | null | undefined> {
    let rec: ProgressRecord | null;
    try {
      rec = await this.o.progress.load(id);
      if (rec?.settled) {
        // settled by another plane whose ack the restarted server forgot
        this.counts.settledElsewhere++;
        m.ack();
        return undefined;
      }
      if (rec?.holder && rec.holder !== this.o.workerId && rec.at !== undefined && this.o.clock.now() - rec.at < EVENT_ACK_WAIT_MS) {
        // still held by the plane that had it before the server restarted: leave it to that one
        // (its working() keeps this delivery from coming back; if it died, it comes back later)
        this.counts.heldElsewhere++;
        m.nak(EVENT_ACK_WAIT_MS);
        return undefined;
      }
    } catch (err) {
      if (this.connection !== epoch) return undefined; // the connection was lost meanwhile: see the source's run()
      rec = null;
      this.o.logger.warn({ batch_id: id, err: String(err) }, 'could not read delivery progress; attempting every webhook');
    }
    if (this.connection !== epoch) return undefined;
    return rec;
  }

  /** Forget batches settled longer ago than the memory (or past MAX_SETTLED); summarise what was acked again. */
  forget(): void {
    const before = this.o.clock.now() - this.settledMemoryMs;
    for (const [id, at] of this.settled) {
      if (at >= before && this.settled.size <= MAX_SETTLED) break;
      this.settled.delete(id);
    }
    const c = this.counts;
    if (c.reacked || c.settledElsewhere || c.heldElsewhere) {
      this.o.logger.warn(
        { settled_here: c.reacked, settled_elsewhere: c.settledElsewhere, held_elsewhere: c.heldElsewhere },
        'JetStream handed out again batches already settled or held (a nats-server restart forgot acks and deliveries); acked ' +
          'or left to their holder, not attempted again',
      );
      c.reacked = c.settledElsewhere = c.heldElsewhere = 0;
    }
  }

  /** The connection to NATS is lost: pulling waits until reconnected() has done its work. */
  disconnected(): void {
    this.connection++;
    this.disconnectedAt ??= this.o.clock.now();
    if (!this.gate) {
      let open!: () => void;
      const promise = new Promise<void>((r) => (open = r));
      this.gate = { promise, open };
    }
  }

  /**
   * The connection is back, maybe to a restarted server that forgot the last seconds: claim what
   * this plane holds (`held`: working(); `batches`: a record naming it the holder), record what it
   * settled lately as settled, wait for the other planes to do the same, then let pulling go on,
   * looking up every batch handed out for a while.
   */
  async reconnected(held: Iterable<JsMsg>, batches: HeldBatches): Promise<void> {
    const epoch = ++this.connection;
    const now = this.o.clock.now();
    const since = (this.disconnectedAt ?? now) - ACK_RISK_MS;
    for (const m of held) m.working();
    const records: Array<{ id: string; rec: ProgressRecord }> = [];
    for (const { batch: b } of batches.values()) {
      // what each unfinished event has had so far, as the pipeline knows it now
      const done: Record<string, string[]> = {};
      for (const id of b.ids) if (!b.finished.has(id)) done[id] = [...(this.o.pipeline.attempted(id) ?? b.done.get(id) ?? [])];
      records.push({ id: b.id, rec: { done, finished: [...b.finished], holder: this.o.workerId, at: now } });
    }
    // a settled record is acked wherever it is handed out again: what the batch had does not matter
    for (const [id, at] of this.settled)
      if (at >= since) records.push({ id, rec: { done: {}, finished: [], holder: this.o.workerId, at: now, settled: true } });
    const unwritten = await this.o.progress.mark(
      records,
      this.o.clock,
      now + MARK_MAX_MS,
      () => this.o.stopped() || this.connection !== epoch,
    );
    if (this.connection !== epoch) return; // disconnected again meanwhile: the next reconnect does it again
    this.o.logger.warn(
      { held: batches.size, records: records.length, unwritten },
      'reconnected to NATS: recorded what this data plane holds and settled lately; pulling again shortly',
    );
    const wait = now + RECONNECT_GRACE_MS - this.o.clock.now();
    if (wait > 0) await sleep(this.o.clock, wait);
    if (this.connection !== epoch) return;
    this.disconnectedAt = null;
    this.suspectUntil = this.o.clock.now() + SUSPECT_MS;
    const gate = this.gate;
    this.gate = null;
    gate?.open();
  }
}
