/**
 * Block key -> replicas holding it, plus each replica's block count (its "tree size").
 * Entries live in a BlockArena in the order they were stored, so a chain is contiguous and the
 * prefix walk steps from one block to the next without hashing; an open-addressing table maps a
 * key to its entry for the walk's first block and wherever a chain breaks. An entry no replica
 * holds stays (dead, still mapped) so a chain stored again revives where it was.
 *
 * Once dead entries outnumber live ones, compaction slides the live ones down in order, a slice
 * per later add or remove (a few table probes each), rather than in one pass that would stall
 * the caller for a whole index's worth of probes. Entries [0, write) are compacted, [write,
 * read) are free, [read, length) are still to visit; new entries append past them all.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import { BlockArena, wordsFor } from './blockArena.ts';
import { SlotTable } from './slotTable.ts';

/** Dead entries tolerated whatever the live count, so small indexes never compact. */
const MIN_DEAD_TO_COMPACT = 4096;
/** One compaction slice: at most this many entries moved or dropped (a table probe each)... */
const SLICE_PROBES = 4;
/** ...or this many visited (live entries that stay put cost no probe). */
const SLICE_VISITS = 256;

export class BlockIndex {
  /** Entries in insertion order: what the prefix walk reads. */
  readonly arena: BlockArena;
  /** Record: [key + 1, arena index]. */
  #map: SlotTable;
  #counts: number[] = [];
  /** Entries with at least one holder. */
  #live = 0;
  #compacting = false;
  #read = 0;
  #write = 0;

  constructor(replicaCount: number, expectedKeys = 0) {
    this.arena = new BlockArena(wordsFor(replicaCount), expectedKeys);
    this.#map = new SlotTable(2, expectedKeys);
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

  /** Arena index of `key`'s entry (it may be dead), or -1. */
  locate(key: BlockKey): number {
    const slot = this.#map.find(key);
    return slot < 0 ? -1 : this.#map.f64[slot * 2 + 1]!;
  }

  has(key: BlockKey, replica: number): boolean {
    const at = this.locate(key);
    return at >= 0 && this.arena.testBit(at, replica);
  }

  /** Marks `key` held by `replica`; true when it was not already. */
  add(key: BlockKey, replica: number): boolean {
    if (this.#compacting) this.#compactSlice();
    const map = this.#map;
    const known = map.size;
    const slot = map.insert(key);
    let at: number;
    if (map.size === known) at = map.f64[slot * 2 + 1]!;
    else {
      at = this.arena.append(key);
      map.f64[slot * 2 + 1] = at;
    }
    const revived = this.arena.isEmpty(at);
    if (!this.arena.setBit(at, replica)) return false;
    if (revived) this.#live++;
    this.#counts[replica]!++;
    return true;
  }

  /** Forgets `key` on `replica`; true when it was held. */
  remove(key: BlockKey, replica: number): boolean {
    if (this.#compacting) this.#compactSlice();
    const at = this.locate(key);
    if (at < 0 || !this.arena.clearBit(at, replica)) return false;
    this.#counts[replica]!--;
    if (this.arena.isEmpty(at)) {
      this.#live--;
      this.#compactIfSparse();
    }
    return true;
  }

  /** Forgets every key on `replica` (a full scan: for clears and restarts, not the hot path). */
  clearReplica(replica: number): void {
    if (this.blockCount(replica) > 0) {
      this.#live -= this.arena.clearReplica(replica);
      this.#compactIfSparse();
    }
    this.#counts[replica] = 0;
  }

  /** Compacts now, to completion: no dead entry is left. */
  compact(): void {
    // A running pass leaves behind the entries that died after it went by: then one more.
    for (let pass = 0; pass < 2; pass++) {
      if (this.arena.length > this.#live) this.#startCompaction();
      while (this.#compacting) this.#compactSlice();
    }
  }

  #compactIfSparse(): void {
    const dead = this.arena.length - this.#live;
    if (dead > this.#live && dead >= MIN_DEAD_TO_COMPACT) this.#startCompaction();
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
      const key = arena.keys[from]!;
      if (arena.isEmpty(from)) {
        map.removeAt(map.find(key));
        arena.free(from);
        probes++;
      } else if (from !== this.#write) {
        arena.move(from, this.#write);
        map.f64[map.find(key) * 2 + 1] = this.#write++;
        probes++;
      } else this.#write++;
    }
  }
}
