/**
 * The waiting queue, in the order of a plain function `before(a, b)`: kvroute's by default,
 * (queueKeyMs, addSeq) (arrival order within a priority level, ageing across levels), or
 * SGLang's waiting list (`listQueue`), where nothing goes before anything already queued.
 * Arrivals usually land at the back and preempted requests at the front, both O(1); anything
 * else is a binary search and a splice. Pops from the front move a head index.
 */
import type { Seq } from './seq.ts';

/** Whether `a` goes before `b` in the queue. */
export type QueueOrder = (a: Seq, b: Seq) => boolean;

const byPriority: QueueOrder = (a, b) =>
  a.queueKeyMs < b.queueKeyMs || (a.queueKeyMs === b.queueKeyMs && a.addSeq < b.addSeq);

/** Compact the array once this many popped slots pile up at its front. */
const COMPACT_AFTER = 1024;

export class WaitQueue {
  readonly #before: QueueOrder;
  #items: Seq[] = [];
  #head = 0;

  constructor(before: QueueOrder = byPriority) {
    this.#before = before;
  }

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

  /** In the queue's order, after every request it does not go before. */
  insert(seq: Seq): void {
    const before = this.#before;
    const items = this.#items;
    const last = items[items.length - 1];
    if (this.size === 0 || !before(seq, last!)) {
      items.push(seq);
      return;
    }
    if (before(seq, items[this.#head]!)) {
      this.unshift(seq);
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

  /** To the front, whatever the order (a request held back for the step, ahead of the rest). */
  unshift(seq: Seq): void {
    if (this.#head > 0) this.#items[--this.#head] = seq;
    else this.#items.unshift(seq);
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

  /**
   * Reorders the queue by `keys` (one per request, in queue order), smallest first; equal keys
   * keep their order, as Python's `list.sort` does. For SGLang's list, whose policy reorders it
   * in place; a queue by priority would lose its order.
   */
  sortByKeys(keys: readonly number[]): void {
    const items = this.toArray();
    if (keys.length !== items.length) throw new Error('sortByKeys needs one key per request');
    const order = items.map((_, i) => i);
    order.sort((a, b) => keys[a]! - keys[b]! || a - b);
    this.#items = order.map((i) => items[i]!);
    this.#head = 0;
  }
}

/**
 * SGLang's waiting queue: a plain list. Arrivals and returned requests go to the back
 * (`waiting_queue.append`, `waiting_queue.extend(retracted_reqs)` in
 * python/sglang/srt/managers/scheduler.py), and a schedule policy may reorder the whole list in
 * place (`calc_priority`, schedule_policy.py; `sortByKeys`); the order it leaves is the next
 * step's order.
 */
export function listQueue(): WaitQueue {
  return new WaitQueue(() => false);
}
