/**
 * Events from an engine whose block hashes differ from kvroute's (real vLLM or SGLang): the
 * index is keyed on the token ids in each BlockStored, chained with kvroute's own hash
 * (extendBlockKey), and this map remembers engine hash -> router key so that BlockRemoved, which
 * carries engine hashes only, can be applied. One map per replica; the gateway's wire decoder
 * produces ForeignKvEvent values (hashes as BigInt, or hex strings for raw-byte hashes) and
 * feeds them through `translate` into the plain KvEvent the index applies.
 */
import { type BlockKey, extendBlockKey } from '../kv/blockKey.ts';
import type { AllBlocksCleared, BlockStored, KvEvent } from '../kv/events.ts';

/** An engine's block hash as decoded off the wire. */
export type EngineHash = bigint | number | string;

export interface ForeignBlockStored {
  type: 'BlockStored';
  blockHashes: readonly EngineHash[];
  parentBlockHash: EngineHash | null;
  tokenIds: readonly number[];
  blockSize: number;
  loraName: string | null;
  cacheSalt: string | null;
}

export interface ForeignBlockRemoved {
  type: 'BlockRemoved';
  blockHashes: readonly EngineHash[];
}

export type ForeignKvEvent = ForeignBlockStored | ForeignBlockRemoved | AllBlocksCleared;

export class ForeignKeyMap {
  #toKey = new Map<EngineHash, BlockKey>();
  /** Engine hashes per router key: two engine hashes (e.g. differing extra keys) can share one. */
  #refs = new Map<BlockKey, number>();
  #unresolvedBlocks = 0;

  /** Engine hashes currently mapped. */
  get size(): number {
    return this.#toKey.size;
  }

  /** Stored blocks dropped because their parent hash was unknown (missed or evicted). */
  get unresolvedBlocks(): number {
    return this.#unresolvedBlocks;
  }

  routerKey(hash: EngineHash): BlockKey | undefined {
    return this.#toKey.get(hash);
  }

  /** Translates foreign events into kvroute events, updating the hash map. */
  translate(events: readonly ForeignKvEvent[]): KvEvent[] {
    const out: KvEvent[] = [];
    for (const event of events) {
      if (event.type === 'BlockStored') {
        const stored = this.#stored(event);
        if (stored) out.push(stored);
      } else if (event.type === 'BlockRemoved') {
        const blockKeys: BlockKey[] = [];
        for (const hash of event.blockHashes) {
          const key = this.#toKey.get(hash);
          if (key === undefined) continue;
          this.#toKey.delete(hash);
          if (this.#release(key)) blockKeys.push(key);
        }
        if (blockKeys.length > 0) out.push({ type: 'BlockRemoved', blockKeys });
      } else {
        this.clear();
        out.push(event);
      }
    }
    return out;
  }

  clear(): void {
    this.#toKey.clear();
    this.#refs.clear();
  }

  /** Drops one engine hash's claim on `key`; true when none is left. */
  #release(key: BlockKey): boolean {
    const refs = (this.#refs.get(key) ?? 1) - 1;
    if (refs > 0) this.#refs.set(key, refs);
    else this.#refs.delete(key);
    return refs <= 0;
  }

  #stored(event: ForeignBlockStored): BlockStored | null {
    let parentKey: BlockKey | null = null;
    if (event.parentBlockHash !== null) {
      const known = this.#toKey.get(event.parentBlockHash);
      if (known === undefined) {
        this.#unresolvedBlocks += event.blockHashes.length;
        return null;
      }
      parentKey = known;
    }
    const scope = {
      cacheSalt: event.cacheSalt ?? undefined,
      loraName: event.loraName ?? undefined,
    };
    const size = event.blockSize;
    const blockKeys: BlockKey[] = [];
    let parent = parentKey;
    for (let b = 0; b < event.blockHashes.length; b++) {
      const tokens = event.tokenIds.slice(b * size, (b + 1) * size);
      if (tokens.length < size) {
        this.#unresolvedBlocks += event.blockHashes.length - b;
        break;
      }
      const key = extendBlockKey(parent, tokens, scope);
      const hash = event.blockHashes[b]!;
      const previous = this.#toKey.get(hash);
      if (previous !== key) {
        if (previous !== undefined) this.#release(previous);
        this.#toKey.set(hash, key);
        this.#refs.set(key, (this.#refs.get(key) ?? 0) + 1);
      }
      blockKeys.push(key);
      parent = key;
    }
    if (blockKeys.length === 0) return null;
    return {
      type: 'BlockStored',
      blockKeys,
      parentKey,
      tokenIds: event.tokenIds.slice(0, blockKeys.length * size),
      blockSize: size,
      loraName: event.loraName,
      cacheSalt: event.cacheSalt,
    };
  }
}
