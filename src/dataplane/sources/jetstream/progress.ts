// What svc_progress (NATS KV) keeps of a batch of events: which webhooks each of its events had and
// which events were settled, so that the batch's next holder (after a drain, a plane's death or a
// nats-server restart) repeats only the attempts that were in flight (CONTRACT 6.6), and, after a
// reconnect, which plane holds it or that it was settled (./reconnect.ts). One record per batch, key =
// batch id. Records are sealed (HMAC with the data plane key, bound to the batch id): a record someone
// else wrote is ignored.
import type { JsMsg } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { sleep, type Clock } from '../../../domain/clock.ts';
import { PROGRESS_BUCKET } from '../../../bus/nats/jetstream.ts';
import type { Seal } from '../../../bus/seal.ts';
import type { InboundEvent, ProgressStore } from '../../pipeline.ts';

/**
 * What svc_progress says of a batch: the webhooks each of its events had, the events settled (every
 * attempt had an outcome), the plane holding it (since when); or the whole batch settled.
 */
export interface ProgressRecord {
  done: Record<string, string[]>;
  finished: string[];
  holder?: string;
  at?: number;
  settled?: boolean;
}

/** A batch held by this plane: its message and where each of its events stands. */
export interface HeldBatch {
  id: string;
  m: JsMsg;
  /** webhooks each unfinished event has had (from its record, then as the pipeline saves them) */
  readonly done: Map<string, readonly string[]>;
  /** events settled (here, or before, by the record) */
  readonly finished: Set<string>;
  /** the events handed to the pipeline */
  readonly ids: string[];
  /** events still with the pipeline */
  left: number;
  /** an event of it was released (a drain): the batch goes back to the queue */
  released: boolean;
}

/** Which webhooks the events of a redelivered batch already had: NATS KV svc_progress, key = batch id. */
export class KvProgress implements ProgressStore {
  /** batches held here and marked as this plane's after a reconnect: their records keep the mark */
  private readonly marks = new Map<string, { holder: string; at: number }>();
  /** the batch each held event belongs to */
  private readonly batchOf = new Map<string, HeldBatch>();

  constructor(
    private readonly kv: KV,
    private readonly seal: Seal,
    /** a record that does not open with the data plane key (written by someone else): ignored */
    private readonly refused: (batchId: string) => void = () => {},
    /**
     * A plain publish on the bus (the stream behind the bucket stores it; no acknowledgement comes
     * back): for records written as often as events settle. Without it they are put and awaited.
     */
    private readonly publish: ((subject: string, data: string) => void) | null = null,
  ) {}

  /** Events of this batch are with the pipeline: their progress is saved in its record. */
  track(b: HeldBatch): void {
    for (const id of b.ids) this.batchOf.set(id, b);
  }

  /** The batch is no longer held here. */
  untrack(b: HeldBatch): void {
    for (const id of b.ids) this.batchOf.delete(id);
    this.marks.delete(b.id);
  }

  /** A record as stored: under the batch's key, sealed with the data plane key and bound to that key. */
  private sealed(batchId: string, rec: ProgressRecord): { key: string; data: string } {
    const key = progressKey(batchId);
    return { key, data: this.seal.sealRecord(key, JSON.stringify(rec)) };
  }

  private put(batchId: string, rec: ProgressRecord): Promise<number> {
    const { key, data } = this.sealed(batchId, rec);
    return this.kv.put(key, data);
  }

  /** A held batch's record as it stands. */
  private recordOf(b: HeldBatch): ProgressRecord {
    return { done: Object.fromEntries(b.done) as Record<string, string[]>, finished: [...b.finished], ...this.marks.get(b.id) };
  }

  /** Write a held batch's record now. */
  write(b: HeldBatch): Promise<number> {
    return this.put(b.id, this.recordOf(b));
  }

  /**
   * Send a held batch's record without waiting for it to be stored: it is on its way as an ack
   * would be (records of one batch are stored in the order they are sent, on one connection).
   */
  async send(b: HeldBatch): Promise<void> {
    if (!this.publish) {
      await this.write(b);
      return;
    }
    const { key, data } = this.sealed(b.id, this.recordOf(b));
    this.publish(`$KV.${PROGRESS_BUCKET}.${key}`, data);
  }

  /** ProgressStore: the pipeline's progress of some events; one record per batch they belong to. */
  async save(events: ReadonlyArray<{ event: InboundEvent; done: readonly string[] }>): Promise<void> {
    const batches = new Set<HeldBatch>();
    for (const e of events) {
      const b = this.batchOf.get(e.event.id);
      if (!b || b.finished.has(e.event.id)) continue;
      b.done.set(e.event.id, e.done);
      batches.add(b);
    }
    await Promise.all([...batches].map((b) => this.write(b)));
  }

  async load(batchId: string): Promise<ProgressRecord | null> {
    const key = progressKey(batchId);
    const e = await this.kv.get(key);
    if (e?.operation !== 'PUT') return null;
    const text = this.seal.openRecord(key, e.string());
    if (text === null) {
      this.refused(batchId);
      return null;
    }
    try {
      const v = JSON.parse(text) as unknown;
      if (!v || typeof v !== 'object' || Array.isArray(v)) return null;
      const o = v as Record<string, unknown>;
      const strings = (a: unknown) => (Array.isArray(a) ? a.filter((x): x is string => typeof x === 'string') : []);
      const done: Record<string, string[]> = {};
      if (o.done && typeof o.done === 'object' && !Array.isArray(o.done))
        for (const [id, hooks] of Object.entries(o.done)) done[id] = strings(hooks);
      const rec: ProgressRecord = { done, finished: strings(o.finished) };
      if (typeof o.holder === 'string') rec.holder = o.holder;
      if (typeof o.at === 'number') rec.at = o.at;
      if (o.settled === true) rec.settled = true;
      return rec;
    } catch {
      return null;
    }
  }

  /**
   * Write these records (an unsettled one with a holder keeps its mark in later saves), trying
   * again what fails until `deadline` (ms, clock time) or `stopped()`. Resolves how many were not written.
   */
  async mark(
    records: ReadonlyArray<{ id: string; rec: ProgressRecord }>,
    clock: Clock,
    deadline: number,
    stopped: () => boolean,
  ): Promise<number> {
    for (const { id, rec } of records)
      if (rec.holder && !rec.settled) this.marks.set(id, { holder: rec.holder, at: rec.at ?? clock.now() });
    let left = [...records];
    while (left.length && !stopped()) {
      const failed: typeof left = [];
      for (let i = 0; i < left.length; i += 256) {
        const chunk = left.slice(i, i + 256);
        const results = await Promise.allSettled(chunk.map((r) => this.put(r.id, r.rec)));
        results.forEach((r, j) => r.status === 'rejected' && failed.push(chunk[j]));
      }
      left = failed;
      if (!left.length || clock.now() >= deadline) break;
      await sleep(clock, 250);
    }
    return left.length;
  }
}

/** KV keys allow [-/_=.a-zA-Z0-9]: batch ids are event ids (UUIDs, or a recovery item's `<uuid>.<rcv id>`). */
const progressKey = (batchId: string) => batchId.replace(/[^-/_=.a-zA-Z0-9]/g, '_');
