/**
 * Block key -> replicas holding it (a bitset per key, inline in one open-addressing table: one
 * probe and one cache line per block, no object per key), plus each replica's block count (its
 * "tree size"). A key no replica holds is deleted.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import { BitsetTable } from './bitsetTable.ts';

export class BlockIndex {
  readonly bits: BitsetTable;
  #counts: number[] = [];

  constructor(replicaCount: number, expectedKeys = 0) {
    this.bits = new BitsetTable(replicaCount, 1, expectedKeys);
    this.ensureReplicas(replicaCount);
  }

  /** Distinct keys held by any replica. */
  get size(): number {
    return this.bits.size;
  }

  blockCount(replica: number): number {
    return this.#counts[replica] ?? 0;
  }

  ensureReplicas(count: number): void {
    while (this.#counts.length < count) this.#counts.push(0);
    this.bits.widen(count);
  }

  has(key: BlockKey, replica: number): boolean {
    const slot = this.bits.find(key);
    return slot >= 0 && this.bits.testBit(slot, replica);
  }

  /** Marks `key` held by `replica`; true when it was not already. */
  add(key: BlockKey, replica: number): boolean {
    if (!this.bits.setBit(this.bits.insert(key), replica)) return false;
    this.#counts[replica]!++;
    return true;
  }

  /** Forgets `key` on `replica`; true when it was held. */
  remove(key: BlockKey, replica: number): boolean {
    const slot = this.bits.find(key);
    if (slot < 0 || !this.bits.clearBit(slot, replica)) return false;
    this.#counts[replica]!--;
    return true;
  }

  /** Forgets every key on `replica` (a full scan: for clears and restarts, not the hot path). */
  clearReplica(replica: number): void {
    if (this.blockCount(replica) > 0) this.bits.clearReplica(replica);
    this.#counts[replica] = 0;
  }
}
