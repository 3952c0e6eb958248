/**
 * Block key -> replicas holding it, plus each replica's block count (its "tree size").
 * Entries live in a BlockArena in the order they were stored, so a chain is contiguous and the
 * prefix walk steps from one block to the next without hashing; an open-addressing table maps a
 * key to its entry for the walk's first block and wherever a chain breaks. An entry no replica
 * holds any more is freed and unmapped at once, so the table only ever holds live keys (engines
 * churn through their unique blocks: keeping dead ones would double the table) and a chain
 * stored again is appended afresh, contiguous as before.
 *
 * Once free entries are twice the live ones, compaction slides the live ones down in order, a
 * slice per later add or remove (a table probe per entry moved), rather than in one pass that
 * would stall the caller for a whole index's worth of probes (waiting for twice, not as many,
 * halves the moves per freed entry). Entries [0, write) are compacted, [write, read) are free,
 * [read, length) are still to visit; new entries append past them all.
 */
import type { BlockKey } from '../../kv/blockKey.ts';
import { BlockArena, wordsFor } from './blockArena.ts';
import { EMPTY, EntryTable } from './entryTable.ts';

/** Free entries tolerated whatever the live count, so small indexes never compact. */
const MIN_FREE_TO_COMPACT = 4096;
/** One compaction slice: at most this many entries moved (a table probe each)... */
const SLICE_PROBES = 4;
/** ...or this many visited (free entries and live ones that stay put cost no probe). */
const SLICE_VISITS = 256;

export class BlockIndex {
  /** Entries in insertion order: what the prefix walk reads. */
  readonly arena: BlockArena;
  /** Key -> arena index. */
  #map: EntryTable;
  #counts: number[] = [];
  /** Entries with at least one holder. */
  #live = 0;
  #compacting = false;
  #read = 0;
  #write = 0;

  constructor(replicaCount: number, expectedKeys = 0) {
    this.arena = new BlockArena(wordsFor(replicaCount), expectedKeys);
    this.#map = new EntryTable(this.arena, expectedKeys);
    this.ensureReplicas(replicaCount);
  }

  /** Distinct keys held by any replica. */
  get size(): number {
    return this.#live;
  }

  /** 32-bit words per replica bitset. */
  get words(): number {
    return this.arena.words;
  }

  blockCount(replica: number): number {
    return this.#counts[replica] ?? 0;
  }

  ensureReplicas(count: number): void {
    while (this.#counts.length < count) this.#counts.push(0);
    this.arena.widen(wordsFor(count));
  }

  /** Arena index of `key`'s entry, or -1 when no replica holds it. */
  locate(key: BlockKey): number {
    return this.#map.find(key);
  }

  has(key: BlockKey, replica: number): boolean {
    const at = this.locate(key);
    return at >= 0 && this.arena.testBit(at, replica);
  }

  /** Warms the table slots of `keys` before a batch of adds or removes (see SlotTable.touch). */
  prefetch(keys: ArrayLike<BlockKey>): void {
    this.#map.touch(keys);
  }

  /** Marks `key` held by `replica`; true when it was not already. */
  add(key: BlockKey, replica: number): boolean {
    if (this.#compacting) this.#compactSlice();
    const map = this.#map;
    const slot = map.probe(key);
    let at = map.entryAt(slot);
    if (at === EMPTY) {
      at = this.arena.append(key);
      map.put(slot, at);
      this.#live++;
    }
    if (!this.arena.setBit(at, replica)) return false;
    this.#counts[replica]!++;
    return true;
  }

  /** Forgets `key` on `replica`; true when it was held. */
  remove(key: BlockKey, replica: number): boolean {
    if (this.#compacting) this.#compactSlice();
    const map = this.#map;
    const slot = map.slotOf(key);
    if (slot < 0) return false;
    const at = map.entryAt(slot);
    if (!this.arena.clearBit(at, replica)) return false;
    this.#counts[replica]!--;
    if (this.arena.isEmpty(at)) {
      map.removeAt(slot);
      this.#drop(at);
    }
    return true;
  }

  /** Forgets every key on `replica` (a full scan: for clears and restarts, not the hot path). */
  clearReplica(replica: number): void {
    if (this.blockCount(replica) > 0) {
      const arena = this.arena;
      for (let at = 0; at < arena.length; at++) {
        if (arena.clearBit(at, replica) && arena.isEmpty(at)) {
          this.#map.removeAt(this.#map.slotOf(arena.keys[at]!));
          this.#drop(at);
        }
      }
    }
    this.#counts[replica] = 0;
  }

  /** Compacts now, to completion: no free entry is left. */
  compact(): void {
    // A running pass leaves behind the entries freed after it went by: then one more.
    for (let pass = 0; pass < 2; pass++) {
      if (this.arena.length > this.#live) this.#startCompaction();
      while (this.#compacting) this.#compactSlice();
    }
  }

  /** Frees unmapped entry `at` and compacts when free entries have piled up. */
  #drop(at: number): void {
    this.arena.free(at);
    this.#live--;
    const free = this.arena.length - this.#live;
    if (free > 2 * this.#live && free >= MIN_FREE_TO_COMPACT) this.#startCompaction();
  }

  #startCompaction(): void {
    if (this.#compacting) return;
    this.#compacting = true;
    this.#read = 0;
    this.#write = 0;
  }

  #compactSlice(): void {
    const arena = this.arena;
    const map = this.#map;
    let probes = 0;
    for (let visits = 0; visits < SLICE_VISITS && probes < SLICE_PROBES; visits++) {
      if (this.#read === arena.length) {
        arena.truncate(this.#write);
        this.#compacting = false;
        return;
      }
      const from = this.#read++;
      if (arena.isFree(from)) continue;
      if (from !== this.#write) {
        // The slot is found while the entry still holds its key (the table compares it there).
        map.repoint(map.slotOf(arena.keys[from]!), this.#write);
        arena.move(from, this.#write);
        probes++;
      }
      this.#write++;
    }
  }
}
