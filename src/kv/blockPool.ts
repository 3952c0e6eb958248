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
import { ADDED, BlockKeyTable, HELD, NO_KEY } from './blockKeyTable.ts';
import { CpuTier } from './cpuTier.ts';
import { cpuTierStored, type KvEvent } from './events.ts';
import { FreeBlockQueue } from './freeBlockQueue.ts';

/** What `tieredPrefix` found: blocks [0, gpuBlocks) on the GPU, [gpuBlocks, cpuEnd) in the tier. */
export interface TieredPrefix {
  gpuBlocks: number;
  /** How many of the GPU's blocks are free (ref count 0). */
  gpuFreeBlocks: number;
  cpuEnd: number;
}

export interface BlockPoolOptions {
  numBlocks: number;
  /** Tokens per block. */
  blockSize: number;
  /** Automatic prefix caching: keep keys, answer lookups, record events (default true). */
  enableCaching?: boolean;
  /**
   * Blocks of a CPU tier (vLLM's OffloadingConnector; default 0: none). With caching on, a
   * cached block the pool evicts goes there (see `cpuTier`).
   */
  cpuBlocks?: number;
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
  /**
   * The CPU tier, its slots past the GPU blocks in the key table. Active (`#offloads`) with a
   * capacity and caching on: each cached block the pool evicts moves there, the least recently
   * stored making room, recorded as vLLM's OffloadingConnector records it: a store with medium
   * "CPU" (hashes only, as take_events builds it) before the GPU removal, then the tier's
   * removals. A key the GPU caches again while the tier holds it leaves the tier (a CPU removal
   * after its GPU store), so a key is in one tier at most.
   */
  readonly cpuTier: CpuTier;
  readonly #offloads: boolean;
  /** Keys cacheFullBlocks took from the CPU tier for the run it is storing. */
  #tierTaken: BlockKey[] = [];
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
    this.cpuTier = new CpuTier(numBlocks, options.cpuBlocks ?? 0);
    this.#offloads = this.cachingEnabled && this.cpuTier.capacityBlocks > 0;
    this.#blockByKey = new BlockKeyTable(
      numBlocks + (this.#offloads ? this.cpuTier.capacityBlocks : 0),
    );
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

  /** Keys cached on the GPU (the CPU tier's are not counted). */
  get cachedBlocks(): number {
    return this.#blockByKey.size - this.cpuTier.size;
  }

  refCount(block: number): number {
    return this.#refs[block]!;
  }

  keyOf(block: number): BlockKey | null {
    const key = this.#keys[block]!;
    return key === NO_KEY ? null : key;
  }

  /** Whether the GPU caches `key`. */
  isCached(key: BlockKey): boolean {
    return this.#gpuBlockOf(key) !== -1;
  }

  /** Whether the CPU tier holds `key`. */
  inCpuTier(key: BlockKey): boolean {
    return this.#offloads && this.#blockByKey.get(key) >= this.numBlocks;
  }

  /** Keys cached on the GPU now; for tests and inspection. */
  cachedKeys(): BlockKey[] {
    const keys = this.#blockByKey.keys();
    return this.#offloads ? keys.filter((key) => this.isCached(key)) : keys;
  }

  /** Keys the CPU tier holds, least recently stored first; for tests and inspection. */
  cpuTierKeys(): BlockKey[] {
    return this.cpuTier.slots().map((slot) => this.#keys[slot]!);
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
      // A block id past the GPU's is a CPU tier slot: not cached on the GPU.
      if (block === -1 || block >= this.numBlocks) break;
      blockIds.push(block);
      if (this.#refs[block] === 0) freeBlocks++;
    }
    return { blockIds, freeBlocks };
  }

  /**
   * Where the cached prefix of `keys[0, maxBlocks)` ends on the GPU, and where the run of
   * blocks after it that the CPU tier holds ends (as many as the GPU's when it holds none),
   * with how many of the GPU's are free: what a load from the tier needs to know, in one walk
   * of the key table and no array of blocks.
   */
  tieredPrefix(keys: readonly BlockKey[], maxBlocks: number): TieredPrefix {
    const limit = Math.min(keys.length, maxBlocks);
    const blockKeys = this.#keys;
    const next = this.#next;
    let block = -1;
    let freeBlocks = 0;
    let i = 0;
    for (; i < limit; i++) {
      const key = keys[i]!;
      const hint = block >= 0 ? next[block]! : -1;
      block = hint >= 0 && blockKeys[hint] === key ? hint : this.#blockByKey.get(key);
      if (block === -1 || block >= this.numBlocks) break;
      if (this.#refs[block] === 0) freeBlocks++;
    }
    const gpuBlocks = i;
    // The lookup that ended the GPU's prefix told whether the tier holds the next block.
    if (this.#offloads && block >= this.numBlocks) {
      for (i++; i < limit && this.#blockByKey.get(keys[i]!) >= this.numBlocks; ) i++;
    }
    return { gpuBlocks, gpuFreeBlocks: freeBlocks, cpuEnd: i };
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
    if (this.#offloads) this.#offloadAll(out, start, end, evicted);
    else {
      for (let i = start; i < end; i++) table.deleteBlock(out[i]!);
      this.#events.push({ type: 'BlockRemoved', blockKeys: evicted });
    }
    return true;
  }

  /** tryAllocate's evictions with a CPU tier: the keys of `blocks[start, end)` go there. */
  #offloadAll(blocks: readonly number[], start: number, end: number, evicted: BlockKey[]): void {
    const dropped: BlockKey[] = [];
    // The tier's oldest blocks that make room leave the table too: warm their slots as well.
    const tier = this.cpuTier;
    const table = this.#blockByKey;
    let leaving = evicted.length - (tier.capacityBlocks - tier.size);
    for (let slot = tier.oldest; leaving-- > 0; slot = tier.after(slot)) table.touchBlock(slot);
    for (let i = start; i < end; i++) {
      if (this.#keys[blocks[i]!] !== NO_KEY) this.#offload(blocks[i]!, dropped);
    }
    this.#recordOffload(evicted, dropped);
  }

  /**
   * Moves the key of GPU block `block` into the CPU tier, the least recently stored key leaving
   * for room (appended to `dropped`).
   */
  #offload(block: number, dropped: BlockKey[]): void {
    const tier = this.cpuTier;
    if (tier.full) {
      const oldest = tier.oldest;
      dropped.push(this.#keys[oldest]!);
      this.#blockByKey.deleteBlock(oldest);
      tier.remove(oldest);
      tier.evictedBlocks++;
    }
    this.#blockByKey.move(block, tier.push());
    tier.storedBlocks++;
  }

  /** Records the GPU's eviction of `evicted` into the CPU tier, and the tier's of `dropped`. */
  #recordOffload(evicted: BlockKey[], dropped: BlockKey[]): void {
    this.#events.push(cpuTierStored(evicted.slice(), this.blockSize));
    this.#events.push({ type: 'BlockRemoved', blockKeys: evicted });
    if (dropped.length > 0) {
      this.#events.push({ type: 'BlockRemoved', blockKeys: dropped, medium: 'CPU' });
    }
  }

  /**
   * Takes `key` out of the CPU tier to load it back into the GPU (the caller caches it there);
   * false when the tier lacks it.
   */
  takeFromCpuTier(key: BlockKey): boolean {
    if (!this.#offloads) return false;
    const slot = this.#blockByKey.get(key);
    if (slot < this.numBlocks) return false;
    this.#blockByKey.deleteBlock(slot);
    this.cpuTier.remove(slot);
    this.cpuTier.loadedBlocks++;
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
      // Keys the CPU tier held left it: recorded after their GPU store.
      if (this.#tierTaken.length > 0) {
        this.#events.push({ type: 'BlockRemoved', blockKeys: this.#tierTaken, medium: 'CPU' });
        this.#tierTaken = [];
      }
    }
  }

  /**
   * Stores block `b`'s key (`keys[b]` names `blockIds[b]`) unless the block has a key already or
   * another GPU block holds this one; a stored block follows its predecessor in the chain
   * (`#next`). A key the CPU tier held moves here from its slot (into `#tierTaken`).
   */
  #store(blockIds: readonly number[], keys: readonly BlockKey[], b: number): boolean {
    const block = blockIds[b]!;
    // A stored key is the block's key from here on (the table writes it).
    if (this.#keys[block] !== NO_KEY) return false;
    if (this.#offloads) {
      const from = this.#blockByKey.addOrMove(keys[b]!, block, this.numBlocks);
      if (from === HELD) return false;
      if (from !== ADDED) {
        this.cpuTier.remove(from);
        this.#tierTaken.push(keys[b]!);
      }
    } else if (!this.#blockByKey.addIfAbsent(keys[b]!, block)) return false;
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
    const dropped: BlockKey[] = [];
    for (const key of keys) {
      const block = this.#gpuBlockOf(key);
      if (block === -1 || this.#refs[block] !== 0) continue;
      // Evicted as the pool evicts: into the CPU tier when there is one.
      if (this.#offloads) this.#offload(block, dropped);
      else this.#blockByKey.deleteBlock(block);
      this.#free.remove(block);
      this.#free.pushFront(block);
      (removed ??= []).push(key);
    }
    if (removed === null) return 0;
    if (this.#offloads) this.#recordOffload(removed, dropped);
    else this.#events.push({ type: 'BlockRemoved', blockKeys: removed });
    return removed.length;
  }

  /**
   * Drops every cached key, the CPU tier's too (AllBlocksCleared); refused (false) while any
   * block is in use.
   */
  resetCache(): boolean {
    if (this.usedBlocks > 0) return false;
    this.#blockByKey.clear();
    this.cpuTier.clear();
    if (this.cachingEnabled) this.#events.push({ type: 'AllBlocksCleared' });
    return true;
  }

  /**
   * Forgets every key cached on the GPU, in use or not, and records no event: a fault (an
   * engine whose cache is lost without telling); the CPU tier keeps its own. Returns how many
   * keys went.
   */
  forgetAllSilently(): number {
    const forgotten = this.cachedBlocks;
    if (this.cpuTier.size === 0) this.#blockByKey.clear();
    else for (let b = 0; b < this.numBlocks; b++) this.#blockByKey.deleteBlock(b);
    return forgotten;
  }

  /** The GPU block caching `key`, or -1. */
  #gpuBlockOf(key: BlockKey): number {
    const block = this.#blockByKey.get(key);
    return block < this.numBlocks ? block : -1;
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
