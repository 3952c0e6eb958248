/**
 * The paged KV block pool with automatic prefix caching (vLLM's block_pool). It owns the ref
 * counts, the free list and the key -> block map, and records KV events as data that the caller
 * drains with `takeEvents()`. Schedulers ask it "what is cached" (`findCachedPrefix`) and "give me
 * room" (`tryAllocate`); they never touch the free list.
 *
 * A free block keeps its key until it is reused, so a finished request's prompt can still be hit.
 * Free cached blocks sit in LRU order; a request's blocks are released last block first, so its
 * tail is evicted before its head. Blocks that hold no key go to the front: reusing them loses
 * nothing.
 */
import type { BlockKey, KeyScope } from './blockKey.ts';
import { BlockKeyTable, NO_KEY } from './blockKeyTable.ts';
import type { KvEvent } from './events.ts';
import { FreeBlockQueue } from './freeBlockQueue.ts';

export interface BlockPoolOptions {
  numBlocks: number;
  /** Tokens per block. */
  blockSize: number;
  /** Automatic prefix caching: keep keys, answer lookups, record events (default true). */
  enableCaching?: boolean;
}

/** The leading cached blocks of a prompt. */
export interface PrefixMatch {
  blockIds: number[];
  /** How many of them are free (ref count 0): taking them uses up free blocks. */
  freeBlocks: number;
}

export class BlockPool {
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly cachingEnabled: boolean;
  readonly #refs: Int32Array;
  /**
   * Block key per block, NO_KEY when the block holds no cached full block: the key table's own
   * array (it alone writes it, as it adds and deletes keys), read here.
   */
  readonly #keys: Float64Array;
  /** The block that held the next block of the chain when this one was cached (-1: none). */
  readonly #next: Int32Array;
  readonly #free: FreeBlockQueue;
  readonly #blockByKey: BlockKeyTable;
  #events: KvEvent[] = [];

  constructor(options: BlockPoolOptions) {
    const { numBlocks, blockSize } = options;
    if (!Number.isInteger(numBlocks) || numBlocks < 1) {
      throw new RangeError(`numBlocks must be an integer >= 1, got ${numBlocks}`);
    }
    if (!Number.isInteger(blockSize) || blockSize < 1) {
      throw new RangeError(`blockSize must be an integer >= 1, got ${blockSize}`);
    }
    this.numBlocks = numBlocks;
    this.blockSize = blockSize;
    this.cachingEnabled = options.enableCaching ?? true;
    this.#refs = new Int32Array(numBlocks);
    this.#next = new Int32Array(numBlocks).fill(-1);
    this.#free = new FreeBlockQueue(numBlocks);
    this.#blockByKey = new BlockKeyTable(numBlocks);
    this.#keys = this.#blockByKey.keyOf;
    for (let b = 0; b < numBlocks; b++) this.#free.pushBack(b);
  }

  /** Blocks with ref count 0, cached ones included (they are evictable). */
  get freeBlocks(): number {
    return this.#free.size;
  }

  get usedBlocks(): number {
    return this.numBlocks - this.#free.size;
  }

  /** Fraction of blocks in use, 0..1. */
  get usage(): number {
    return this.usedBlocks / this.numBlocks;
  }

  get cachedBlocks(): number {
    return this.#blockByKey.size;
  }

  refCount(block: number): number {
    return this.#refs[block]!;
  }

  keyOf(block: number): BlockKey | null {
    const key = this.#keys[block]!;
    return key === NO_KEY ? null : key;
  }

  isCached(key: BlockKey): boolean {
    return this.#blockByKey.has(key);
  }

  /** Keys held now; for tests and inspection. */
  cachedKeys(): BlockKey[] {
    return this.#blockByKey.keys();
  }

  /** Free list from next-to-reuse to last; for tests and inspection. */
  freeOrder(): number[] {
    return this.#free.toArray();
  }

  /**
   * The longest run of leading `keys` that is cached, at most `maxBlocks` long. No side effects:
   * `acquire` the blocks to pin them.
   */
  findCachedPrefix(keys: readonly BlockKey[], maxBlocks: number): PrefixMatch {
    const blockIds: number[] = [];
    let freeBlocks = 0;
    if (!this.cachingEnabled) return { blockIds, freeBlocks };
    const limit = Math.min(keys.length, maxBlocks);
    const blockKeys = this.#keys;
    const next = this.#next;
    let block = -1;
    for (let i = 0; i < limit; i++) {
      const key = keys[i]!;
      // Try the block that followed the previous one when the chain was cached: a small array
      // read instead of a probe into the key table.
      const hint = block >= 0 ? next[block]! : -1;
      block = hint >= 0 && blockKeys[hint] === key ? hint : this.#blockByKey.get(key);
      if (block === -1) break;
      blockIds.push(block);
      if (this.#refs[block] === 0) freeBlocks++;
    }
    return { blockIds, freeBlocks };
  }

  /** Takes one reference on each block; free ones leave the free list. */
  acquire(blockIds: readonly number[]): void {
    for (const block of blockIds) {
      const refs = this.#refs[block]!;
      if (refs === 0) this.#free.remove(block);
      this.#refs[block] = refs + 1;
    }
  }

  /**
   * Takes `count` blocks from the front of the free list, evicting the keys they held (one
   * BlockRemoved event), and appends them to `out` with ref count 1. Returns false and changes
   * nothing when fewer than `count` blocks are free.
   */
  tryAllocate(count: number, out: number[]): boolean {
    if (count > this.#free.size) return false;
    const start = out.length;
    this.#free.takeFront(count, out);
    const end = out.length;
    const keys = this.#keys;
    const refs = this.#refs;
    let keyed = 0;
    for (let i = start; i < end; i++) {
      const block = out[i]!;
      if (keys[block] !== NO_KEY) keyed++;
      refs[block] = 1;
    }
    if (keyed === 0) return true;
    // The evicted keys, in block order, into an array of their exact length (cheaper than pushes).
    const evicted = new Array<BlockKey>(keyed);
    for (let i = start, j = 0; j < keyed; i++) {
      const key = keys[out[i]!]!;
      if (key !== NO_KEY) evicted[j++] = key;
    }
    const table = this.#blockByKey;
    // Warm all the slots first (see BlockKeyTable.touch): deletes one by one wait on memory.
    // A delete by block starts at the block's own slot (no probe) and resets its key.
    table.touchBlocks(out, start, end);
    for (let i = start; i < end; i++) table.deleteBlock(out[i]!);
    this.#events.push({ type: 'BlockRemoved', blockKeys: evicted });
    return true;
  }

  /**
   * Drops one reference on each block, the last block first, so a request's tail is evicted
   * before its head. Blocks reaching 0 are freed: cached ones at the back (LRU), others at the
   * front.
   */
  release(blockIds: readonly number[]): void {
    for (let i = blockIds.length - 1; i >= 0; i--) {
      const block = blockIds[i]!;
      const refs = this.#refs[block]! - 1;
      if (refs < 0) throw new Error(`block ${block} released more often than acquired`);
      this.#refs[block] = refs;
      if (refs > 0) continue;
      if (this.#keys[block] === NO_KEY) this.#free.pushFront(block);
      else this.#free.pushBack(block);
    }
  }

  /**
   * Registers the newly full blocks `[fromBlock, toBlock)` of one request: `keys[b]` names
   * `blockIds[b]`, whose tokens are `tokenIds[b * blockSize ..]`. Records one BlockStored per
   * contiguous run. A key another block already holds is skipped (that block stays the cached
   * copy; this one is reused like any uncached block).
   */
  cacheFullBlocks(
    blockIds: readonly number[],
    keys: readonly BlockKey[],
    fromBlock: number,
    toBlock: number,
    tokenIds: ArrayLike<number>,
    scope: KeyScope,
  ): void {
    if (!this.cachingEnabled) return;
    this.#blockByKey.touch(keys, fromBlock, toBlock);
    for (let b = fromBlock; b < toBlock; b++) {
      const runStart = b;
      while (b < toBlock && this.#store(blockIds, keys, b)) b++;
      if (b === runStart) continue; // block b stored nothing
      this.#events.push({
        type: 'BlockStored',
        blockKeys: keys.slice(runStart, b),
        parentKey: runStart === 0 ? null : keys[runStart - 1]!,
        tokenIds: tokenRange(tokenIds, runStart * this.blockSize, b * this.blockSize),
        blockSize: this.blockSize,
        loraName: scope.loraName ?? null,
        cacheSalt: scope.cacheSalt ?? null,
      });
    }
  }

  /**
   * Stores block `b`'s key (`keys[b]` names `blockIds[b]`) unless the block has a key already or
   * another block holds this one; a stored block follows its predecessor in the chain (`#next`).
   */
  #store(blockIds: readonly number[], keys: readonly BlockKey[], b: number): boolean {
    const block = blockIds[b]!;
    // A stored key is the block's key from here on (the table writes it).
    if (this.#keys[block] !== NO_KEY || !this.#blockByKey.addIfAbsent(keys[b]!, block)) {
      return false;
    }
    if (b > 0) this.#next[blockIds[b - 1]!] = block;
    return true;
  }

  /**
   * Forgets the cached keys among `keys` whose blocks are free (ref count 0): one BlockRemoved
   * with those keys, and the blocks go to the front of the free list (they hold nothing now).
   * Keys not cached or held by a running request are left alone. For a runtime whose physical KV
   * lost blocks the pool still names. Returns how many keys were dropped.
   */
  uncache(keys: Iterable<BlockKey>): number {
    let removed: BlockKey[] | null = null;
    for (const key of keys) {
      const block = this.#blockByKey.get(key);
      if (block === -1 || this.#refs[block] !== 0) continue;
      this.#blockByKey.delete(key);
      this.#free.remove(block);
      this.#free.pushFront(block);
      (removed ??= []).push(key);
    }
    if (removed === null) return 0;
    this.#events.push({ type: 'BlockRemoved', blockKeys: removed });
    return removed.length;
  }

  /** Drops every cached key (AllBlocksCleared); refused (false) while any block is in use. */
  resetCache(): boolean {
    if (this.usedBlocks > 0) return false;
    this.#blockByKey.clear();
    if (this.cachingEnabled) this.#events.push({ type: 'AllBlocksCleared' });
    return true;
  }

  /**
   * Forgets every cached key, in use or not, and records no event: a fault (an engine whose
   * cache is lost without telling). Returns how many keys went.
   */
  forgetAllSilently(): number {
    const forgotten = this.#blockByKey.size;
    this.#blockByKey.clear();
    return forgotten;
  }

  /** Events recorded since the last call, oldest first. */
  takeEvents(): KvEvent[] {
    const events = this.#events;
    if (events.length === 0) return []; // never hand out the live list
    this.#events = [];
    return events;
  }
}

/**
 * `tokenIds[from, to)` for an event: a view of an Int32Array (the engine's), else a plain array
 * (a typed array's own slice would stay typed).
 */
function tokenRange(
  tokenIds: ArrayLike<number>,
  from: number,
  to: number,
): readonly number[] | Int32Array {
  if (tokenIds instanceof Int32Array) return tokenIds.subarray(from, to);
  if (Array.isArray(tokenIds)) return (tokenIds as number[]).slice(from, to);
  const out = new Array<number>(to - from);
  for (let i = from; i < to; i++) out[i - from] = tokenIds[i]!;
  return out;
}
