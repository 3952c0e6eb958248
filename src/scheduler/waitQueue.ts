/**
 * The waiting queue, ordered by (queueKeyMs, addSeq): arrival order within a priority level,
 * ageing across levels. Arrivals usually land at the back and preempted requests at the front,
 * both O(1); anything else is a binary search and a splice.
 */
import type { Seq } from './seq.ts';
import { SeqQueue } from './seqQueue.ts';

const before = (a: Seq, b: Seq): boolean =>
  a.queueKeyMs < b.queueKeyMs || (a.queueKeyMs === b.queueKeyMs && a.addSeq < b.addSeq);

export class WaitQueue extends SeqQueue {
  insert(seq: Seq): void {
    const items = this.items;
    const last = items[items.length - 1];
    if (this.size === 0 || !before(seq, last!)) {
      items.push(seq);
      return;
    }
    if (before(seq, items[this.head]!)) {
      this.pushFront(seq);
      return;
    }
    let lo = this.head;
    let hi = items.length - 1; // items[hi] is after seq, items[lo] is not
    while (hi - lo > 1) {
      const mid = (lo + hi) >>> 1;
      if (before(seq, items[mid]!)) hi = mid;
      else lo = mid;
    }
    items.splice(hi, 0, seq);
  }
}
