// A first-in first-out queue with O(1) push and shift (Array.prototype.shift copies): a head index
// into an array that is reset when it empties and compacted when its dead front grows large. The
// fair queues of ingest (src/domain/fair-queue.ts) and of the delivery slots
// (src/dataplane/slots.ts) are made of it.
export class Fifo<T> {
  private items: Array<T | undefined> = [];
  private head = 0;

  get size(): number {
    return this.items.length - this.head;
  }

  push(x: T): void {
    this.items.push(x);
  }

  /** The first item, left in the queue. */
  peek(): T | undefined {
    return this.head < this.items.length ? this.items[this.head] : undefined;
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const x = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return x;
  }

  clear(): void {
    this.items = [];
    this.head = 0;
  }
}
