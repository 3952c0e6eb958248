/**
 * SGLang's waiting queue: a plain list. Arrivals and returned requests go to the back
 * (`waiting_queue.append`, `waiting_queue.extend(retracted_reqs)` in
 * python/sglang/srt/managers/scheduler.py), and a schedule policy may reorder the whole list in
 * place (`calc_priority`, schedule_policy.py); the order it leaves is the next step's order.
 */
import type { Seq } from './seq.ts';

/** Compact the array once this many popped slots pile up at its front. */
const COMPACT_AFTER = 1024;

export class ListQueue {
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
    items[this.#head++] = undefined as unknown as Seq;
    if (this.#head === items.length) {
      items.length = 0;
      this.#head = 0;
    } else if (this.#head >= COMPACT_AFTER && this.#head * 2 >= items.length) {
      this.#items = items.slice(this.#head);
      this.#head = 0;
    }
    return seq;
  }

  /** To the back, whatever the request (SGLang appends arrivals and retracted requests alike). */
  insert(seq: Seq): void {
    this.#items.push(seq);
  }

  /** To the front (a request held back for the step, ahead of everything still queued). */
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
   * keep their order, as Python's `list.sort` does.
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
