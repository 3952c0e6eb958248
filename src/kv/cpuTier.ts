/**
 * A replica's CPU tier of KV blocks (vLLM's LRUOffloadingManager over a CPUBackend of
 * `num_cpu_blocks`): its slots in LRU order, and what went in and out. Pure data: no clock, no
 * I/O, and no keys of its own.
 *
 * The block pool owns it (blockPool.ts). A CPU slot is a block id past the pool's GPU blocks,
 * [firstSlot, firstSlot + capacityBlocks), in the pool's own key table: a key is in that table
 * once whichever tier holds it, and a block moving from the GPU to the tier (or back) moves its
 * entry there instead of leaving one table and entering another. A tier with its own key table
 * cost a lookup for every block the GPU stored (was it in the tier?), and an insertion and a
 * removal for every block it evicted, most of what a CPU tier added to a simulation.
 */
/** No slot: the end of the list, an empty tier. */
export const NO_SLOT = -1;

export class CpuTier {
  readonly capacityBlocks: number;
  /** The first slot's block id in the pool's key table. */
  readonly firstSlot: number;
  /** Per slot (less firstSlot): the slot stored before and after it (NO_SLOT at the ends). */
  readonly #prev: Int32Array;
  readonly #next: Int32Array;
  /** Least and most recently stored slots. */
  #first = NO_SLOT;
  #last = NO_SLOT;
  #size = 0;
  /** Slots holding no block, a stack of `#freeCount`, the lowest on top. */
  readonly #free: Int32Array;
  #freeCount = 0;
  /** Blocks written into the tier so far, read back out, and evicted for room. */
  storedBlocks = 0;
  loadedBlocks = 0;
  evictedBlocks = 0;

  constructor(firstSlot: number, capacityBlocks: number) {
    if (!Number.isInteger(capacityBlocks) || capacityBlocks < 0) {
      throw new RangeError(`capacityBlocks must be an integer >= 0, got ${capacityBlocks}`);
    }
    this.firstSlot = firstSlot;
    this.capacityBlocks = capacityBlocks;
    this.#prev = new Int32Array(capacityBlocks);
    this.#next = new Int32Array(capacityBlocks);
    this.#free = new Int32Array(capacityBlocks);
    this.#freeAll();
  }

  get size(): number {
    return this.#size;
  }

  get full(): boolean {
    return this.#freeCount === 0;
  }

  /** The least recently stored slot, or NO_SLOT when the tier holds nothing. */
  get oldest(): number {
    return this.#first;
  }

  /** The slot stored after `slot`, or NO_SLOT when it is the most recent. */
  after(slot: number): number {
    return this.#next[slot - this.firstSlot]!;
  }

  /** Whether block id `block` of the pool's key table is one of the tier's slots. */
  isSlot(block: number): boolean {
    return block >= this.firstSlot;
  }

  /** Takes a free slot (the tier must not be full) and makes it the most recent. */
  push(): number {
    const slot = this.#free[--this.#freeCount]!;
    const i = slot - this.firstSlot;
    this.#prev[i] = this.#last;
    this.#next[i] = NO_SLOT;
    if (this.#last === NO_SLOT) this.#first = slot;
    else this.#next[this.#last - this.firstSlot] = slot;
    this.#last = slot;
    this.#size++;
    return slot;
  }

  /** Frees `slot` (which holds a block), wherever it is in the order. */
  remove(slot: number): void {
    const i = slot - this.firstSlot;
    const prev = this.#prev[i]!;
    const next = this.#next[i]!;
    if (prev === NO_SLOT) this.#first = next;
    else this.#next[prev - this.firstSlot] = next;
    if (next === NO_SLOT) this.#last = prev;
    else this.#prev[next - this.firstSlot] = prev;
    this.#free[this.#freeCount++] = slot;
    this.#size--;
  }

  /** Frees every slot (the engine's cache was reset; the pool clears their keys). */
  clear(): void {
    this.#first = NO_SLOT;
    this.#last = NO_SLOT;
    this.#size = 0;
    this.#freeAll();
  }

  /** Slots held, least recently stored first; for tests and inspection. */
  slots(): number[] {
    const out: number[] = [];
    for (let s = this.#first; s !== NO_SLOT; s = this.#next[s - this.firstSlot]!) out.push(s);
    return out;
  }

  #freeAll(): void {
    const n = this.capacityBlocks;
    for (let i = 0; i < n; i++) this.#free[i] = this.firstSlot + n - 1 - i;
    this.#freeCount = n;
  }
}
