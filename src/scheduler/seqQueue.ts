/**
 * What the scheduler's two waiting queues share: an array popped from the front by moving a head
 * index (O(1)), compacted once enough popped slots pile up. The queues differ only in where
 * `insert` puts a request (waitQueue.ts: by priority and arrival; listQueue.ts: at the back).
 */
import type { Seq } from './seq.ts';

/** Compact the array once this many popped slots pile up at its front. */
const COMPACT_AFTER = 1024;

export abstract class SeqQueue {
  /** Queue slots; those before `head` are popped. */
  protected items: Seq[] = [];
  protected head = 0;

  abstract insert(seq: Seq): void;

  get size(): number {
    return this.items.length - this.head;
  }

  peek(): Seq | undefined {
    return this.items[this.head];
  }

  shift(): Seq | undefined {
    const items = this.items;
    if (this.head >= items.length) return undefined;
    const seq = items[this.head];
    // Let go of the popped request: a slot left pointing at it would keep its prompt alive.
    items[this.head++] = undefined as unknown as Seq;
    if (this.head === items.length) {
      items.length = 0;
      this.head = 0;
    } else if (this.head >= COMPACT_AFTER && this.head * 2 >= items.length) {
      this.items = items.slice(this.head);
      this.head = 0;
    }
    return seq;
  }

  /** To the front, ahead of everything still queued. */
  protected pushFront(seq: Seq): void {
    if (this.head > 0) this.items[--this.head] = seq;
    else this.items.unshift(seq);
  }

  remove(seq: Seq): boolean {
    const i = this.items.indexOf(seq, this.head);
    if (i === -1) return false;
    this.items.splice(i, 1);
    return true;
  }

  /** Queue order, front first (a copy). */
  toArray(): Seq[] {
    return this.items.slice(this.head);
  }
}
