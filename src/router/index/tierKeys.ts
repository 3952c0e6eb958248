/**
 * Which blocks each replica's CPU tier holds: a set of (replica, block key) pairs, one set per
 * replica. The tier walk (tierMatch.ts) only asks "does replica r's tier hold this block", and
 * the CPU events only add and remove pairs, so the tier needs none of a BlockIndex's entries in
 * chain order, bitsets across replicas or compaction: a BlockIndex took 1.5x the time on a full
 * tier's churn of adds, removals and lookups (docs/benchmarks.md, "#55").
 *
 * Each replica's keys sit in an open-addressing table of doubles (block keys are never
 * negative, so -1 marks an empty slot), probed linearly from the top bits of the key's
 * Fibonacci hash; a removal shifts the run after it back (no tombstones), so a table that churns
 * for a whole run never degrades. A table doubles when it is over three quarters full.
 */
import type { BlockKey } from '../../kv/blockKey.ts';

const EMPTY = -1;
/** Slots of a replica's table before its first key (a power of two). */
const FIRST_SLOTS = 16;

export class TierKeys {
  /** Per replica, its keys by slot (EMPTY where none); a power of two long. */
  #tables: Float64Array[] = [];
  /** Per replica, the keys held. */
  #counts: number[] = [];
  #pairs = 0;
  /** What `warm` read, kept only so that its loads are not optimized away. */
  warmed = 0;

  constructor(replicaCount = 0) {
    this.ensureReplicas(replicaCount);
  }

  /** (Replica, key) pairs held, over every replica: 0 when no tier holds anything. */
  get size(): number {
    return this.#pairs;
  }

  ensureReplicas(count: number): void {
    while (this.#tables.length < count) {
      this.#tables.push(new Float64Array(FIRST_SLOTS).fill(EMPTY));
      this.#counts.push(0);
    }
  }

  /** Keys `replica`'s tier holds. */
  blockCount(replica: number): number {
    return this.#counts[replica] ?? 0;
  }

  /**
   * Loads the home slots of `keys` [from, to) in `replica`'s table without acting on them (see
   * EntryTable.touch): the CPU overlaps their cache misses, and the adds or removes that follow
   * find them in cache.
   */
  warm(keys: readonly BlockKey[], replica: number, from = 0, to = keys.length): void {
    const table = this.#tables[replica];
    if (table === undefined) return;
    let sink = 0;
    for (let i = from; i < to; i++) sink += table[home(keys[i]!, table.length)]!;
    this.warmed = sink;
  }

  has(key: BlockKey, replica: number): boolean {
    const table = this.#tables[replica];
    if (table === undefined) return false;
    const mask = table.length - 1;
    for (let slot = home(key, table.length); ; slot = (slot + 1) & mask) {
      const held = table[slot]!;
      if (held === key) return true;
      if (held === EMPTY) return false;
    }
  }

  /** Marks `key` held by `replica`; true when it was not already. */
  add(key: BlockKey, replica: number): boolean {
    this.ensureReplicas(replica + 1);
    let table = this.#tables[replica]!;
    if (4 * (this.#counts[replica]! + 1) > 3 * table.length) table = this.#grow(replica);
    const mask = table.length - 1;
    let slot = home(key, table.length);
    for (;;) {
      const held = table[slot]!;
      if (held === key) return false;
      if (held === EMPTY) break;
      slot = (slot + 1) & mask;
    }
    table[slot] = key;
    this.#counts[replica]!++;
    this.#pairs++;
    return true;
  }

  /** Forgets `key` on `replica`; true when it was held. */
  remove(key: BlockKey, replica: number): boolean {
    const table = this.#tables[replica];
    if (table === undefined) return false;
    const mask = table.length - 1;
    let slot = home(key, table.length);
    for (;;) {
      const held = table[slot]!;
      if (held === key) break;
      if (held === EMPTY) return false;
      slot = (slot + 1) & mask;
    }
    // Backward shift: each later key of the run moves into the hole when the hole lies between
    // its home slot and where it sits, so every key stays reachable from its home.
    let hole = slot;
    for (let next = (hole + 1) & mask; ; next = (next + 1) & mask) {
      const moving = table[next]!;
      if (moving === EMPTY) break;
      const from = home(moving, table.length);
      if (((next - from) & mask) >= ((next - hole) & mask)) {
        table[hole] = moving;
        hole = next;
      }
    }
    table[hole] = EMPTY;
    this.#counts[replica]!--;
    this.#pairs--;
    return true;
  }

  /** Forgets every key on `replica`. */
  clearReplica(replica: number): void {
    const count = this.#counts[replica];
    if (count === undefined || count === 0) return;
    this.#tables[replica]!.fill(EMPTY);
    this.#pairs -= count;
    this.#counts[replica] = 0;
  }

  /** Keys `replica`'s tier holds, in no particular order; for tests and inspection. */
  keys(replica: number): BlockKey[] {
    const table = this.#tables[replica];
    return table === undefined ? [] : Array.from(table).filter((k) => k !== EMPTY);
  }

  #grow(replica: number): Float64Array {
    const old = this.#tables[replica]!;
    const table = new Float64Array(2 * old.length).fill(EMPTY);
    const mask = table.length - 1;
    for (let i = 0; i < old.length; i++) {
      const key = old[i]!;
      if (key === EMPTY) continue;
      let slot = home(key, table.length);
      while (table[slot] !== EMPTY) slot = (slot + 1) & mask;
      table[slot] = key;
    }
    this.#tables[replica] = table;
    return table;
  }
}

/** A key's home slot in a table of `slots` (a power of two): its hash's top bits. */
function home(key: BlockKey, slots: number): number {
  // 32 - log2(slots) = clz32(slots) + 1 (tables have at least FIRST_SLOTS slots).
  return Math.imul(key >>> 0, 0x9e3779b1) >>> (Math.clz32(slots) + 1);
}
