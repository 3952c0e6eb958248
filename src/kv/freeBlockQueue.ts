/**
 * The pool's free list: an intrusive doubly linked list over typed arrays (vLLM's
 * FreeKVCacheBlockQueue), so taking a block from the middle (a prefix hit on a free cached block)
 * is O(1) like popping the head. The head is the next block to reuse (least recently used).
 */
export class FreeBlockQueue {
  readonly #next: Int32Array;
  readonly #prev: Int32Array;
  /** Sentinel indexes: the list runs HEAD -> ... -> TAIL. */
  readonly #head: number;
  readonly #tail: number;
  #size = 0;

  constructor(capacity: number) {
    this.#next = new Int32Array(capacity + 2).fill(-1);
    this.#prev = new Int32Array(capacity + 2).fill(-1);
    this.#head = capacity;
    this.#tail = capacity + 1;
    this.#next[this.#head] = this.#tail;
    this.#prev[this.#tail] = this.#head;
  }

  get size(): number {
    return this.#size;
  }

  has(block: number): boolean {
    return this.#prev[block] !== -1;
  }

  /** The least recently freed block, or -1 when empty. */
  peekFront(): number {
    const first = this.#next[this.#head]!;
    return first === this.#tail ? -1 : first;
  }

  popFront(): number {
    const first = this.peekFront();
    if (first !== -1) this.remove(first);
    return first;
  }

  /**
   * Unlinks the `count` blocks at the front (at most `size`) and appends them to `out` in list
   * order: one walk down the list and one relink of the head, where `count` popFront calls would
   * relink it `count` times.
   */
  takeFront(count: number, out: number[]): void {
    if (count > this.#size)
      throw new Error(`${count} blocks asked of a free list of ${this.#size}`);
    const next = this.#next;
    const prev = this.#prev;
    const at = out.length;
    let block = next[this.#head]!;
    // A long run: grow `out` once and write by index, where pushes would regrow it several times.
    // A short one (a decode's next block) is pushed: pushes leave room for the next ones.
    if (count > 8) {
      out.length = at + count;
      for (let i = 0; i < count; i++) {
        out[at + i] = block;
        const after = next[block]!;
        prev[block] = -1;
        next[block] = -1;
        block = after;
      }
    } else {
      for (let i = 0; i < count; i++) {
        out.push(block);
        const after = next[block]!;
        prev[block] = -1;
        next[block] = -1;
        block = after;
      }
    }
    next[this.#head] = block;
    prev[block] = this.#head;
    this.#size -= count;
  }

  pushBack(block: number): void {
    this.#linkAfter(this.#prev[this.#tail]!, block);
  }

  pushFront(block: number): void {
    this.#linkAfter(this.#head, block);
  }

  remove(block: number): void {
    const prev = this.#prev[block]!;
    const next = this.#next[block]!;
    if (prev === -1) throw new Error(`block ${block} is not in the free list`);
    this.#next[prev] = next;
    this.#prev[next] = prev;
    this.#prev[block] = -1;
    this.#next[block] = -1;
    this.#size--;
  }

  /** Blocks from head (next to reuse) to tail; for tests and inspection. */
  toArray(): number[] {
    const out: number[] = [];
    for (let b = this.#next[this.#head]!; b !== this.#tail; b = this.#next[b]!) out.push(b);
    return out;
  }

  #linkAfter(prev: number, block: number): void {
    if (this.#prev[block] !== -1) throw new Error(`block ${block} is already in the free list`);
    const next = this.#next[prev]!;
    this.#next[prev] = block;
    this.#prev[block] = prev;
    this.#next[block] = next;
    this.#prev[next] = block;
    this.#size++;
  }
}
