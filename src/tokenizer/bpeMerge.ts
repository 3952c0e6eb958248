/**
 * The BPE merge loop over symbol ids: repeatedly merge the adjacent pair of lowest rank, the
 * leftmost first among equals, until no adjacent pair has a rank. That is the rule of Hugging
 * Face `tokenizers` (rank = the merge's index in `merges`) and of tiktoken (rank = the merged
 * token's rank); the ranks come from the caller's PairTable.
 *
 * Short words take the plain loop (scan for the minimum, splice): fewest allocations, and a word
 * of a few symbols has nothing to gain from a heap. Long words (a 2 MB run of one letter is one
 * word to the pre-tokenizer) take a heap over a linked list, O(n log n), resumable: it stops when
 * its deadline passes, so the caller can yield to the event loop and carry on later.
 */
import type { Pairs } from './pairTable.ts';

/** Words up to this many symbols take the plain loop. */
export const SHORT_WORD_SYMBOLS = 48;

/** Merges `sym` in place (the plain loop) and returns it, shortened to the final symbols. */
export function mergeShort(pairs: Pairs, sym: number[]): number[] {
  const n = sym.length;
  if (n < 2) return sym;
  const ranks = new Array<number>(n - 1);
  for (let i = 0; i < n - 1; i++) ranks[i] = pairs.rank(sym[i]!, sym[i + 1]!);
  for (;;) {
    let best = -1;
    let bestRank = Number.POSITIVE_INFINITY;
    for (let i = 0; i < ranks.length; i++) {
      const r = ranks[i]!;
      if (r >= 0 && r < bestRank) {
        bestRank = r;
        best = i;
      }
    }
    if (best < 0) return sym;
    sym[best] = pairs.merged(sym[best]!, sym[best + 1]!);
    sym.splice(best + 1, 1);
    ranks.splice(best, 1);
    if (best > 0) ranks[best - 1] = pairs.rank(sym[best - 1]!, sym[best]!);
    if (best < sym.length - 1) ranks[best] = pairs.rank(sym[best]!, sym[best + 1]!);
  }
}

/** Heap keys are rank * POS_SCALE + position: lowest rank first, then leftmost. */
const POS_SCALE = 2 ** 26;
/** Merges between two looks at the clock. */
const STEPS_PER_CLOCK_READ = 2048;
const DEAD = -2;

/** One long word's merge, run in slices until done. */
export class LongMerge {
  readonly #pairs: Pairs;
  readonly #sym: Int32Array;
  readonly #prev: Int32Array;
  readonly #next: Int32Array;
  #heap: Float64Array;
  #heapSize = 0;
  /** Pairs queued so far (queuing all of a 2M-symbol word takes a while too). */
  #queued = 0;
  #done = false;

  constructor(pairs: Pairs, symbols: Int32Array) {
    const n = symbols.length;
    if (n >= POS_SCALE) throw new RangeError(`a word of ${n} symbols is too long to merge`);
    this.#pairs = pairs;
    this.#sym = symbols;
    this.#prev = new Int32Array(n);
    this.#next = new Int32Array(n);
    this.#heap = new Float64Array(Math.max(16, n));
    for (let i = 0; i < n; i++) {
      this.#prev[i] = i - 1;
      this.#next[i] = i + 1 < n ? i + 1 : -1;
    }
  }

  /** Merges until done (true) or `deadlineMs` (performance.now()) has passed (false). */
  run(deadlineMs: number): boolean {
    const sym = this.#sym;
    const prev = this.#prev;
    const next = this.#next;
    let steps = 0;
    const pairs = sym.length - 1;
    while (this.#queued < pairs) {
      this.#offer(this.#queued++);
      if (++steps === STEPS_PER_CLOCK_READ) {
        steps = 0;
        if (performance.now() > deadlineMs) return false;
      }
    }
    while (this.#heapSize > 0) {
      if (++steps === STEPS_PER_CLOCK_READ) {
        steps = 0;
        if (performance.now() > deadlineMs) return false;
      }
      const key = this.#pop();
      const rank = Math.floor(key / POS_SCALE);
      const pos = key - rank * POS_SCALE;
      // Stale entries (a side already merged away or into something else) are skipped.
      if (prev[pos] === DEAD) continue;
      const right = next[pos]!;
      if (right < 0 || this.#pairs.rank(sym[pos]!, sym[right]!) !== rank) continue;
      sym[pos] = this.#pairs.merged(sym[pos]!, sym[right]!);
      const after = next[right]!;
      next[pos] = after;
      if (after >= 0) prev[after] = pos;
      prev[right] = DEAD;
      if (prev[pos]! >= 0) this.#offer(prev[pos]!);
      if (after >= 0) this.#offer(pos);
    }
    this.#done = true;
    return true;
  }

  /** The final symbols, left to right (after run() returned true). */
  symbols(): number[] {
    if (!this.#done) throw new Error('LongMerge.symbols() before the merge finished');
    const out: number[] = [];
    for (let i = 0; i >= 0; i = this.#next[i]!) out.push(this.#sym[i]!);
    return out;
  }

  /** Queues the pair starting at `pos` if it has a rank. */
  #offer(pos: number): void {
    const rank = this.#pairs.rank(this.#sym[pos]!, this.#sym[this.#next[pos]!]!);
    if (rank < 0) return;
    if (this.#heapSize === this.#heap.length) {
      const bigger = new Float64Array(this.#heap.length * 2);
      bigger.set(this.#heap);
      this.#heap = bigger;
    }
    const heap = this.#heap;
    const key = rank * POS_SCALE + pos;
    let i = this.#heapSize++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent]! <= key) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = key;
  }

  #pop(): number {
    const heap = this.#heap;
    const top = heap[0]!;
    const last = heap[--this.#heapSize]!;
    const size = this.#heapSize;
    let i = 0;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= size) break;
      if (child + 1 < size && heap[child + 1]! < heap[child]!) child++;
      if (heap[child]! >= last) break;
      heap[i] = heap[child]!;
      i = child;
    }
    heap[i] = last;
    return top;
  }
}
