/**
 * The ForeignKeyMap as it was before its hash maps became typed arrays (engine hash -> handle,
 * router key -> refs in a SlotTable): kept verbatim as the model that the property test in
 * test/router/router.foreignKeys.test.ts holds the current one to. Not used by any code.
 */
import { type BlockKey, extendBlockKey } from '../../src/kv/blockKey.ts';
import type { KvEvent } from '../../src/kv/events.ts';

import type {
  EngineHash,
  ForeignBlockRemoved,
  ForeignBlockStored,
  ForeignKvEvent,
} from '../../src/router/index/foreignKeys.ts';

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

export class ReferenceForeignKeyMap {
  #toKey = new Map<EngineHash, BlockKey>();
  /** Counted engine hashes per router key: two engine hashes (e.g. differing extra keys) can share one. */
  #refs = new Map<BlockKey, number>();
  /** Groups holding each engine hash; kept only once a second group has appeared (else: group 0). */
  #groups = new Map<EngineHash, number>();
  #hybrid = false;
  /** Group bit -> whether that group keeps whole prefixes (its kind is not a partial one). */
  #kinds = new Map<number, boolean>();
  /** Groups whose holding makes a block a cache hit; 0: none known yet, every group counts. */
  #fullMask = 0;
  #unresolvedBlocks = 0;

  /** Engine hashes currently mapped. */
  get size(): number {
    return this.#toKey.size;
  }

  /** Stored blocks dropped because their parent hash was unknown (missed or evicted). */
  get unresolvedBlocks(): number {
    return this.#unresolvedBlocks;
  }

  /** Counted engine hashes per router key: the keys a replica holds, each as many times. */
  get refs(): ReadonlyMap<BlockKey, number> {
    return this.#refs;
  }

  routerKey(hash: EngineHash): BlockKey | undefined {
    return this.#toKey.get(hash);
  }

  /** Translates foreign events into kvroute events, updating the hash map. */
  translate(events: readonly ForeignKvEvent[]): KvEvent[] {
    const out: KvEvent[] = [];
    for (const event of events) {
      if (event.type === 'BlockStored') this.#stored(event, out);
      else if (event.type === 'BlockRemoved') this.#removed(event, out);
      else {
        this.clear();
        out.push(event);
      }
    }
    return out;
  }

  clear(): void {
    this.#toKey.clear();
    this.#refs.clear();
    this.#groups.clear();
    this.#kinds.clear();
    this.#hybrid = false;
    this.#fullMask = 0;
  }

  #counted(mask: number): boolean {
    return (this.#fullMask === 0 ? mask : mask & this.#fullMask) !== 0;
  }

  #maskOf(hash: EngineHash): number {
    return this.#groups.get(hash) ?? 1;
  }

  /** One more counted engine hash for `key`. */
  #retain(key: BlockKey): void {
    this.#refs.set(key, (this.#refs.get(key) ?? 0) + 1);
  }

  /** One counted engine hash fewer for `key`; true when none is left. */
  #release(key: BlockKey): boolean {
    const refs = (this.#refs.get(key) ?? 1) - 1;
    if (refs > 0) this.#refs.set(key, refs);
    else this.#refs.delete(key);
    return refs <= 0;
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
    for (const [hash, key] of this.#toKey) {
      const mask = this.#maskOf(hash);
      this.#fullMask = before;
      const was = this.#counted(mask);
      this.#fullMask = fullMask;
      const is = this.#counted(mask);
      if (was && !is && this.#release(key)) removed.push(key);
      else if (!was && is) {
        if (!this.#refs.has(key)) added.push(key);
        this.#retain(key);
      }
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

  #removed(event: ForeignBlockRemoved, out: KvEvent[]): void {
    const bit = this.#learnGroup(event, out);
    const blockKeys: BlockKey[] = [];
    for (const hash of event.blockHashes) {
      const key = this.#toKey.get(hash);
      if (key === undefined) continue;
      if (!this.#hybrid) {
        // One group, which always counts: the common case, kept to two map operations.
        this.#toKey.delete(hash);
        if (this.#release(key)) blockKeys.push(key);
        continue;
      }
      const mask = this.#maskOf(hash);
      if ((mask & bit) === 0) continue;
      const left = mask & ~bit;
      if (left === 0) {
        this.#toKey.delete(hash);
        this.#groups.delete(hash);
      } else this.#groups.set(hash, left);
      if (this.#counted(mask) && !this.#counted(left) && this.#release(key)) blockKeys.push(key);
    }
    if (blockKeys.length > 0) out.push({ type: 'BlockRemoved', blockKeys });
  }

  #stored(event: ForeignBlockStored, out: KvEvent[]): void {
    const bit = this.#learnGroup(event, out);
    let parentKey: BlockKey | null = null;
    if (event.parentBlockHash !== null) {
      const known = this.#toKey.get(event.parentBlockHash);
      if (known === undefined) {
        this.#unresolvedBlocks += event.blockHashes.length;
        return;
      }
      parentKey = known;
    }
    const scope = {
      cacheSalt: event.cacheSalt ?? undefined,
      loraName: event.loraName ?? undefined,
    };
    const size = event.blockSize;
    const counted: BlockKey[] = [];
    const stale: BlockKey[] = [];
    let parent = parentKey;
    let chained = 0;
    for (let b = 0; b < event.blockHashes.length; b++) {
      const tokens = event.tokenIds.slice(b * size, (b + 1) * size);
      if (tokens.length < size) {
        this.#unresolvedBlocks += event.blockHashes.length - b;
        break;
      }
      const key = extendBlockKey(parent, tokens, scope);
      const hash = event.blockHashes[b]!;
      const previous = this.#toKey.get(hash);
      parent = key;
      chained++;
      if (!this.#hybrid) {
        // One group, which always counts (see #counted): what changes is the hash's key.
        if (previous !== key) {
          if (previous !== undefined && this.#release(previous)) stale.push(previous);
          this.#toKey.set(hash, key);
          this.#retain(key);
        }
        counted.push(key);
        continue;
      }
      const oldMask = previous === undefined ? 0 : this.#maskOf(hash);
      const wasCounted = previous !== undefined && this.#counted(oldMask);
      // The same hash for other tokens: its removal was missed; the old block is gone.
      const mask = (previous === key ? oldMask : 0) | bit;
      if (previous !== key) {
        if (wasCounted && this.#release(previous!)) stale.push(previous!);
        this.#toKey.set(hash, key);
      }
      if (this.#hybrid) this.#groups.set(hash, mask);
      // A store only adds groups: a counted hash stays counted.
      if (this.#counted(mask)) {
        if (!(previous === key && wasCounted)) this.#retain(key);
        counted.push(key);
      }
    }
    if (stale.length > 0) out.push({ type: 'BlockRemoved', blockKeys: stale });
    if (counted.length === 0) return;
    out.push({
      type: 'BlockStored',
      blockKeys: counted,
      parentKey,
      tokenIds: event.tokenIds.slice(0, chained * size),
      blockSize: size,
      loraName: event.loraName,
      cacheSalt: event.cacheSalt,
    });
  }
}
