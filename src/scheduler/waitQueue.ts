/**
 * The waiting queue, ordered by (queueKeyMs, addSeq): arrival order within a priority level,
 * ageing across levels. Arrivals usually land at the back and preempted requests at the front,
 * both O(1); anything else is a binary search and a splice.
 */
import type { Seq } from './seq.ts';

const before = (a: Seq, b: Seq): boolean =>
  a.queueKeyMs < b.queueKeyMs || (a.queueKeyMs === b.queueKeyMs && a.addSeq < b.addSeq);

/** Compact the array once this many popped slots pile up at its front. */
const COMPACT_AFTER = 1024;

export class WaitQueue {
  #items: Seq[] = [];
  #head = 0;

  get size(): number {
    return this.#items.length - this.#head;
  }

  peek(): Seq | undefined {
    return this.#items[this.#head];
  }

  shift(): Seq | undefined {
    const items = this.#items;
    if (this.#head >= items.length) return undefined;
    const seq = items[this.#head];
    // Let go of the popped request: a slot left pointing at it would keep its prompt alive.
    items[this.#head++] = undefined as unknown as Seq;
    if (this.#head === items.length) {
      items.length = 0;
      this.#head = 0;
    } else if (this.#head >= COMPACT_AFTER && this.#head * 2 >= items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return seq;
  }

  insert(seq: Seq): void {
    const items = this.#items;
    const last = items[items.length - 1];
    if (this.size === 0 || !before(seq, last!)) {
      items.push(seq);
      return;
    }
    if (before(seq, items[this.#head]!)) {
      if (this.#head > 0) items[--this.#head] = seq;
      else items.unshift(seq);
      return;
    }
    let lo = this.#head;
    let hi = items.length - 1; // items[hi] is after seq, items[lo] is not
    while (hi - lo > 1) {
      const mid = (lo + hi) >>> 1;
      if (before(seq, items[mid]!)) hi = mid;
      else lo = mid;
    }
    items.splice(hi, 0, seq);
  }

  remove(seq: Seq): boolean {
    const i = this.#items.indexOf(seq, this.#head);
    if (i === -1) return false;
    this.#items.splice(i, 1);
    return true;
  }

  /** Queue order, front first (a copy). */
  toArray(): Seq[] {
    return this.#items.slice(this.#head);
  }
}
