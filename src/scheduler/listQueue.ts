/**
 * SGLang's waiting queue: a plain list. Arrivals and returned requests go to the back
 * (`waiting_queue.append`, `waiting_queue.extend(retracted_reqs)` in
 * python/sglang/srt/managers/scheduler.py), and a schedule policy may reorder the whole list in
 * place (`calc_priority`, schedule_policy.py); the order it leaves is the next step's order.
 */
import type { Seq } from './seq.ts';
import { SeqQueue } from './seqQueue.ts';

export class ListQueue extends SeqQueue {
  /** To the back, whatever the request (SGLang appends arrivals and retracted requests alike). */
  insert(seq: Seq): void {
    this.items.push(seq);
  }

  /** To the front (a request held back for the step, ahead of everything still queued). */
  unshift(seq: Seq): void {
    this.pushFront(seq);
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
    this.items = order.map((i) => items[i]!);
    this.head = 0;
  }
}
