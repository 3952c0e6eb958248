/**
 * Events from an engine whose block hashes differ from kvroute's (real vLLM or SGLang): the
 * index is keyed on the token ids in each BlockStored, chained with kvroute's own hash
 * (extendBlockKey), and this map remembers engine hash -> router key so that BlockRemoved, which
 * carries engine hashes only, can be applied. One map per replica; the gateway's wire decoder
 * produces ForeignKvEvent values (hashes as BigInt, or hex strings for raw-byte hashes) and
 * feeds them through `translate` into the plain KvEvent the index applies.
 *
 * Hybrid models (vLLM >= 0.26: `group_idx`, `kv_cache_spec_kind`) keep one KV cache group per
 * attention kind and store the same block hash once per group; a sliding-window group drops
 * blocks that left its window long before the full-attention group evicts them. A prefix is a
 * cache hit only while a full-attention group still holds it, so the map tracks which groups
 * hold each engine hash and the router's index holds a block while any counted group does:
 * full-attention kinds (and groups that name no kind, as older vLLM and SGLang send), or every
 * group when a model has no full-attention group at all (sliding-window-only models).
 */
import { type BlockKey, chainBlockKeys, extendBlockKey, type KeyScope } from '../../kv/blockKey.ts';
import { type AllBlocksCleared, cpuTierStored, type KvEvent } from '../../kv/events.ts';
import { type EngineHash, EngineHashTable, NO_HANDLE } from './engineHashTable.ts';

export type { EngineHash } from './engineHashTable.ts';

export interface ForeignBlockStored {
  type: 'BlockStored';
  blockHashes: readonly EngineHash[];
  parentBlockHash: EngineHash | null;
  tokenIds: readonly number[];
  blockSize: number;
  loraName: string | null;
  cacheSalt: string | null;
  /** KV cache group (hybrid models); null or absent: group 0. */
  groupIdx?: number | null;
  /** The group's attention kind (vLLM's KVCacheSpecKind value); null or absent: unknown. */
  kvCacheSpecKind?: string | null;
  /** Where the blocks live: "GPU" (or null, absent) the pool, "CPU" an offloading tier. */
  medium?: string | null;
}

export interface ForeignBlockRemoved {
  type: 'BlockRemoved';
  blockHashes: readonly EngineHash[];
  groupIdx?: number | null;
  medium?: string | null;
}

export type ForeignKvEvent = ForeignBlockStored | ForeignBlockRemoved | AllBlocksCleared;

/**
 * vLLM's KVCacheSpecKind values whose groups do not keep a whole prefix (a window, a chunk, a
 * recurrent state, or attention over something other than the prompt).
 */
const PARTIAL_KINDS: ReadonlySet<string> = new Set([
  'sliding_window',
  'sliding_window_mla',
  'chunked_local_attention',
  'mamba',
  'encoder_only_attention',
  'cross_attention',
]);

/** Group bits: groups past 30 share the last bit (no vLLM model has that many). */
const MAX_GROUP_BIT = 30;
const groupBit = (groupIdx: number | null | undefined): number =>
  1 << Math.min(Math.max(groupIdx ?? 0, 0), MAX_GROUP_BIT);

/** A medium other than the GPU pool's ("GPU", or none named). */
const isTier = (medium: string | null | undefined): boolean =>
  medium !== undefined && medium !== null && medium !== 'GPU';

/** Handles an engine hash's slots start with; they grow fourfold, from HANDLES_DOUBLE on twofold. */
const MIN_HANDLES = 1024;
const HANDLES_DOUBLE = 1 << 15;
/** The most blocks `reserve` makes room for (a bogus pool size must not take gigabytes). */
const MAX_RESERVED_BLOCKS = 1 << 20;

export class ForeignKeyMap {
  /** Engine hash -> handle: a small integer indexing `#keyOf`, `#maskOf` and `#seqOf` below. */
  #handles = new EngineHashTable();
  /** Handle -> router key. */
  #keyOf = new Float64Array(MIN_HANDLES);
  /** Handle -> groups holding the hash (group 0 alone until a second group appears). */
  #maskOf = new Int32Array(MIN_HANDLES);
  /**
   * Handle -> when its hash was mapped (-1: a free handle): a recount re-judges hashes in the
   * order they were mapped, as it did walking a Map.
   */
  #seqOf = new Float64Array(MIN_HANDLES).fill(-1);
  #nextSeq = 0;
  /** Handles given back by removed hashes, reused first. */
  #free: number[] = [];
  #nextHandle = 0;
  /**
   * Router key -> counted engine hashes for it past the first, kept by the index as it applies
   * this map's events (EventIndex.applyEvents): two engine hashes, e.g. differing extra keys,
   * can share one router key, which the index holds as one bit.
   */
  readonly sharedKeys = new Map<BlockKey, number>();
  #hybrid = false;
  /** Engine hash -> router key of the blocks in the CPU tier (OffloadingConnector events). */
  #cpuKeys = new Map<EngineHash, BlockKey>();
  /** Group bit -> whether that group keeps whole prefixes (its kind is not a partial one). */
  #kinds = new Map<number, boolean>();
  /** Groups whose holding makes a block a cache hit; 0: none known yet, every group counts. */
  #fullMask = 0;
  #unresolvedBlocks = 0;

  /** Engine hashes currently mapped. */
  get size(): number {
    return this.#handles.size;
  }

  /** Stored blocks dropped because their parent hash was unknown (missed or evicted). */
  get unresolvedBlocks(): number {
    return this.#unresolvedBlocks;
  }

  routerKey(hash: EngineHash): BlockKey | undefined {
    const handle = this.#handles.get(hash);
    return handle === NO_HANDLE ? undefined : this.#keyOf[handle];
  }

  /**
   * Translates foreign events into kvroute events, updating the hash map: a store of each key
   * whose engine hash starts to count, a removal of each whose hash stops. Applied with
   * `sharedKeys`, a key stays while any of its counted hashes does.
   */
  translate(events: readonly ForeignKvEvent[]): KvEvent[] {
    const out: KvEvent[] = [];
    for (const event of events) {
      if (event.type !== 'AllBlocksCleared' && isTier(event.medium)) this.#tier(event, out);
      else if (event.type === 'BlockStored') this.#stored(event, out);
      else if (event.type === 'BlockRemoved') this.#removed(event, out);
      else {
        this.clear();
        out.push(event);
      }
    }
    return out;
  }

  /** Engine hashes held in the CPU tier now. */
  get cpuSize(): number {
    return this.#cpuKeys.size;
  }

  clear(): void {
    this.#cpuKeys.clear();
    this.#handles.clear();
    this.#seqOf.fill(-1, 0, this.#nextHandle);
    this.#free.length = 0;
    this.#nextHandle = 0;
    this.#nextSeq = 0;
    this.sharedKeys.clear();
    this.#kinds.clear();
    this.#hybrid = false;
    this.#fullMask = 0;
  }

  #counted(mask: number): boolean {
    return (this.#fullMask === 0 ? mask : mask & this.#fullMask) !== 0;
  }

  /** The handle `#claim` takes next: the last one given back, else a fresh one. */
  #nextFree(): number {
    const free = this.#free.length;
    return free > 0 ? this.#free[free - 1]! : this.#nextHandle;
  }

  /**
   * Takes the handle `#nextFree` named, which the hash table has just mapped a new hash to,
   * for `key`, held by the groups in `mask`.
   */
  #claim(key: BlockKey, mask: number): void {
    let handle: number;
    if (this.#free.length > 0) handle = this.#free.pop()!;
    else {
      handle = this.#nextHandle++;
      if (handle === this.#keyOf.length) this.#grow();
    }
    this.#keyOf[handle] = key;
    this.#maskOf[handle] = mask;
    this.#seqOf[handle] = this.#nextSeq++;
  }

  /** Forgets `hash` (mapped to `handle`). */
  #unmap(hash: EngineHash, handle: number): void {
    this.#handles.delete(hash);
    this.#giveBack(handle);
  }

  /** Frees `handle`, whose hash the table no longer holds. */
  #giveBack(handle: number): void {
    this.#seqOf[handle] = -1;
    this.#free.push(handle);
  }

  /**
   * Makes room for `blocks` engine hashes (the replica's KV pool, e.g. vLLM's `num_gpu_blocks`)
   * without growing while its events fill the map: each growth of a large table is a pass over
   * it, a stall of milliseconds on the event path. Capped at MAX_RESERVED_BLOCKS.
   */
  reserve(blocks: number): void {
    const n = Math.min(Math.max(0, Math.floor(blocks) || 0), MAX_RESERVED_BLOCKS);
    this.#handles.reserve(n);
    if (n > this.#keyOf.length) this.#resizeHandles(n);
  }

  #grow(): void {
    this.#resizeHandles(this.#keyOf.length * (this.#keyOf.length < HANDLES_DOUBLE ? 4 : 2));
  }

  #resizeHandles(handles: number): void {
    const keyOf = new Float64Array(handles);
    keyOf.set(this.#keyOf);
    this.#keyOf = keyOf;
    const maskOf = new Int32Array(handles);
    maskOf.set(this.#maskOf);
    this.#maskOf = maskOf;
    const seqOf = new Float64Array(handles).fill(-1);
    seqOf.set(this.#seqOf);
    this.#seqOf = seqOf;
  }

  /** Mapped handles in the order their hashes were mapped. */
  #handlesInOrder(): number[] {
    const handles: number[] = [];
    for (let h = 0; h < this.#nextHandle; h++) if (this.#seqOf[h]! >= 0) handles.push(h);
    const seqOf = this.#seqOf;
    return handles.sort((a, b) => seqOf[a]! - seqOf[b]!);
  }

  /** A group's first event: note its kind; a new group may change what counts. */
  #learnGroup(event: ForeignBlockStored | ForeignBlockRemoved, out: KvEvent[]): number {
    const bit = groupBit(event.groupIdx);
    if (bit !== 1 && !this.#hybrid) this.#hybrid = true;
    if (event.type === 'BlockStored' && !this.#kinds.has(bit)) {
      const kind = event.kvCacheSpecKind ?? null;
      this.#kinds.set(bit, kind === null || !PARTIAL_KINDS.has(kind));
      let fullMask = 0;
      for (const [b, full] of this.#kinds) if (full) fullMask |= b;
      if (fullMask !== this.#fullMask) this.#recount(fullMask, out);
    }
    return bit;
  }

  /** What counts changed (a full-attention group appeared): re-judge every mapped hash. */
  #recount(fullMask: number, out: KvEvent[]): void {
    const before = this.#fullMask;
    const added: BlockKey[] = [];
    const removed: BlockKey[] = [];
    for (const handle of this.#handlesInOrder()) {
      const key = this.#keyOf[handle]!;
      const mask = this.#maskOf[handle]!;
      this.#fullMask = before;
      const was = this.#counted(mask);
      this.#fullMask = fullMask;
      const is = this.#counted(mask);
      if (was && !is) removed.push(key);
      else if (!was && is) added.push(key);
    }
    this.#fullMask = fullMask;
    if (removed.length > 0) out.push({ type: 'BlockRemoved', blockKeys: removed });
    if (added.length > 0) {
      out.push({
        type: 'BlockStored',
        blockKeys: added,
        parentKey: null,
        tokenIds: [],
        blockSize: 0,
        loraName: null,
        cacheSalt: null,
      });
    }
  }

  /**
   * A CPU-tier event. vLLM's OffloadingConnector names a stored block by its hash alone (no
   * tokens, no parent), so its key is the one its GPU store mapped (vLLM offloads a block while
   * the GPU still holds it); a store that does carry whole blocks of tokens is keyed on them. A
   * hash this map never saw on the GPU is unresolved. Group kinds do not apply: the connector
   * stores whole blocks of every group under one hash.
   */
  #tier(event: ForeignBlockStored | ForeignBlockRemoved, out: KvEvent[]): void {
    const blockKeys: BlockKey[] = [];
    if (event.type === 'BlockRemoved') {
      for (const hash of event.blockHashes) {
        const key = this.#cpuKeys.get(hash);
        if (key === undefined) continue;
        this.#cpuKeys.delete(hash);
        blockKeys.push(key);
      }
      if (blockKeys.length > 0) out.push({ type: 'BlockRemoved', blockKeys, medium: 'CPU' });
      return;
    }
    const size = event.blockSize;
    const byTokens = size >= 1 && event.tokenIds.length === size * event.blockHashes.length;
    let parent: BlockKey | null =
      event.parentBlockHash === null ? null : (this.routerKey(event.parentBlockHash) ?? null);
    let chained = event.parentBlockHash === null || parent !== null;
    const scope = {
      cacheSalt: event.cacheSalt ?? undefined,
      loraName: event.loraName ?? undefined,
    };
    for (let b = 0; b < event.blockHashes.length; b++) {
      const hash = event.blockHashes[b]!;
      let key = this.routerKey(hash) ?? this.#cpuKeys.get(hash);
      if (key === undefined && byTokens && chained) {
        key = extendBlockKey(parent, event.tokenIds.slice(b * size, (b + 1) * size), scope);
      }
      chained = key !== undefined;
      if (key === undefined) {
        this.#unresolvedBlocks++;
        continue;
      }
      parent = key;
      this.#cpuKeys.set(hash, key);
      blockKeys.push(key);
    }
    if (blockKeys.length === 0) return;
    out.push(cpuTierStored(blockKeys, size));
  }

  #removed(event: ForeignBlockRemoved, out: KvEvent[]): void {
    const bit = this.#learnGroup(event, out);
    const blockKeys: BlockKey[] = [];
    const hashes = event.blockHashes;
    if (!this.#hybrid) {
      // One group, which always counts: the common case, a probe of each table per hash.
      for (let i = 0; i < hashes.length; i++) {
        const handle = this.#handles.take(hashes[i]!);
        if (handle === NO_HANDLE) continue;
        blockKeys.push(this.#keyOf[handle]!);
        this.#giveBack(handle);
      }
      if (blockKeys.length > 0) out.push({ type: 'BlockRemoved', blockKeys });
      return;
    }
    for (let i = 0; i < hashes.length; i++) {
      const hash = hashes[i]!;
      const handle = this.#handles.get(hash);
      if (handle === NO_HANDLE) continue;
      const key = this.#keyOf[handle]!;
      const mask = this.#maskOf[handle]!;
      if ((mask & bit) === 0) continue;
      const left = mask & ~bit;
      if (left === 0) this.#unmap(hash, handle);
      else this.#maskOf[handle] = left;
      if (this.#counted(mask) && !this.#counted(left)) blockKeys.push(key);
    }
    if (blockKeys.length > 0) out.push({ type: 'BlockRemoved', blockKeys });
  }

  #stored(event: ForeignBlockStored, out: KvEvent[]): void {
    const bit = this.#learnGroup(event, out);
    let parentKey: BlockKey | null = null;
    if (event.parentBlockHash !== null) {
      const known = this.routerKey(event.parentBlockHash);
      if (known === undefined) {
        this.#unresolvedBlocks += event.blockHashes.length;
        return;
      }
      parentKey = known;
    }
    const size = event.blockSize;
    const hashes = event.blockHashes;
    const keys = chainedKeys(event, parentKey);
    const chained = keys.length;
    if (chained < hashes.length) this.#unresolvedBlocks += hashes.length - chained;
    // Made only when a hash's old block goes (a missed removal), not per event.
    let stale: BlockKey[] | null = null;
    // The keys whose hash starts to count. One group, which always counts (see #counted): every
    // chained key, as the event's own array until a hash turns out to be counted already.
    let counted: BlockKey[] = this.#hybrid ? [] : keys;
    for (let b = 0; b < chained; b++) {
      const key = keys[b]!;
      const hash = hashes[b]!;
      // A new hash is mapped to the next free handle in the same probe.
      const handle = this.#handles.getOrAdd(hash, this.#nextFree());
      if (!this.#hybrid) {
        // What changes is the hash's key, if anything.
        if (handle === NO_HANDLE) this.#claim(key, 1);
        else {
          const previous = this.#keyOf[handle]!;
          if (previous === key) {
            if (counted === keys) counted = keys.slice(0, b);
            continue;
          }
          (stale ??= []).push(previous);
          this.#keyOf[handle] = key;
        }
        if (counted !== keys) counted.push(key);
        continue;
      }
      const previous = handle === NO_HANDLE ? undefined : this.#keyOf[handle]!;
      const oldMask = handle === NO_HANDLE ? 0 : this.#maskOf[handle]!;
      const wasCounted = handle !== NO_HANDLE && this.#counted(oldMask);
      // The same hash for other tokens: its removal was missed; the old block is gone.
      const mask = (previous === key ? oldMask : 0) | bit;
      if (handle === NO_HANDLE) this.#claim(key, mask);
      else {
        if (previous !== key && wasCounted) (stale ??= []).push(previous!);
        this.#keyOf[handle] = key;
        this.#maskOf[handle] = mask;
      }
      // A store only adds groups: a counted hash stays counted.
      if (this.#counted(mask) && !(previous === key && wasCounted)) counted.push(key);
    }
    if (stale !== null) {
      counted = cancelRestored(stale, counted, keys);
      if (stale.length > 0) out.push({ type: 'BlockRemoved', blockKeys: stale });
    }
    if (counted.length === 0) return;
    const tokens = chained * size;
    out.push({
      type: 'BlockStored',
      blockKeys: counted,
      parentKey,
      // Handed on as it came when every token is in a chained block (no copy per event).
      tokenIds: tokens === event.tokenIds.length ? event.tokenIds : event.tokenIds.slice(0, tokens),
      blockSize: size,
      loraName: event.loraName,
      cacheSalt: event.cacheSalt,
    });
  }
}

/**
 * A stale key that this same store also counted (one engine hash twice in one event, re-pointed
 * to other tokens the second time): the two cancel, removed from both lists, as the removal
 * would otherwise apply before the store it follows. Returns the counted keys, copied before a
 * change when they are the event's own `keys`.
 */
function cancelRestored(stale: BlockKey[], counted: BlockKey[], keys: BlockKey[]): BlockKey[] {
  let out = counted;
  for (let i = stale.length - 1; i >= 0; i--) {
    const at = out.lastIndexOf(stale[i]!);
    if (at < 0) continue;
    if (out === keys) out = keys.slice();
    out.splice(at, 1);
    stale.splice(i, 1);
  }
  return out;
}

/**
 * Keys of the event's blocks chained from `parentKey`, up to the first block its tokens do not
 * fill (that one and the rest stay unresolved). A whole number of tokens per block goes through
 * one chained pass over the event's tokens, without a copy per block.
 */
function chainedKeys(event: ForeignBlockStored, parentKey: BlockKey | null): BlockKey[] {
  const size = event.blockSize;
  // No scope object for the common event with neither (the same keys: both read as absent).
  const scope: KeyScope | undefined =
    (event.cacheSalt ?? null) === null && (event.loraName ?? null) === null
      ? undefined
      : { cacheSalt: event.cacheSalt ?? undefined, loraName: event.loraName ?? undefined };
  const blocks = event.blockHashes.length;
  if (Number.isInteger(size) && size > 0) {
    return chainBlockKeys(event.tokenIds, size, parentKey, scope, blocks);
  }
  const keys: BlockKey[] = [];
  // A malformed size: block by block, as a slice of the tokens each.
  let parent = parentKey;
  for (let b = 0; b < blocks; b++) {
    const tokens = event.tokenIds.slice(b * size, (b + 1) * size);
    if (tokens.length < size) break;
    parent = extendBlockKey(parent, tokens, scope);
    keys.push(parent);
  }
  return keys;
}
