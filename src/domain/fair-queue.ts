// Per-org queues taken round robin (CONTRACT §8: ingest and the HTTP API are shared between orgs:
// src/ingest/ingest.ts, src/http/fair-admission.ts). Items wait in the queue of their key; next()
// takes one from each key with items in turn, so a group that takes n items gives every waiting key
// an equal share (and a key with fewer items leaves the rest to the others). With one key it is a
// plain FIFO.
import { Fifo } from './fifo.ts';

export class FairQueue<T> {
  private readonly queues = new Map<string, Fifo<T>>();
  /** keys with items, in the order they take turns */
  private readonly ring: string[] = [];
  private turn = 0;
  private count = 0;

  /** Items waiting, all keys together. */
  get size(): number {
    return this.count;
  }

  /** Items waiting under one key. */
  sizeOf(key: string): number {
    return this.queues.get(key)?.size ?? 0;
  }

  /** Keys with items waiting. */
  get keys(): number {
    return this.ring.length;
  }

  /** The fewest items any key has waiting (0 when none waits). */
  get fewest(): number {
    let fewest = Infinity;
    for (const q of this.queues.values()) fewest = Math.min(fewest, q.size);
    return fewest === Infinity ? 0 : fewest;
  }

  /** The oldest item of each key with items. */
  *oldest(): IterableIterator<T> {
    for (const q of this.queues.values()) {
      const first = q.peek();
      if (first !== undefined) yield first;
    }
  }

  push(key: string, item: T): void {
    let q = this.queues.get(key);
    if (!q) {
      this.queues.set(key, (q = new Fifo<T>()));
      // a key that starts waiting takes its turn last in the current round
      this.ring.splice(this.turn, 0, key);
      this.turn = (this.turn + 1) % this.ring.length;
    }
    q.push(item);
    this.count++;
  }

  /**
   * The next item: the oldest of the key whose turn it is; then it is the next key's turn. With
   * `ready`, keys it says no to are passed over this time (they keep their place in the ring).
   */
  next(ready?: (key: string) => boolean): T | undefined {
    if (this.ring.length === 0) return undefined;
    if (ready) {
      const first = this.turn;
      while (!ready(this.ring[this.turn])) {
        this.turn = (this.turn + 1) % this.ring.length;
        if (this.turn === first) return undefined;
      }
    }
    const key = this.ring[this.turn];
    const q = this.queues.get(key)!;
    const item = q.shift() as T;
    this.count--;
    if (q.size === 0) {
      this.queues.delete(key);
      this.ring.splice(this.turn, 1);
    } else {
      this.turn++;
    }
    if (this.turn >= this.ring.length) this.turn = 0;
    return item;
  }
}
