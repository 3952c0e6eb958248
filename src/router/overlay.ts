/**
 * Predict-on-route overlay: the blocks of a just-routed request count as cached on its replica
 * for `ttlMs`, until the engine's own KV events arrive, so siblings of one prefix sent in a burst
 * do not scatter across cold replicas. A small table of its own (recent routes only, so it stays
 * in cache) maps key -> [expiresAtMs, replica bitset]; the prefix walk probes it beside the
 * index. A key shares one expiry, the latest: a block predicted on two replicas within one TTL
 * keeps both warm until the later prediction expires. An eviction event does not cancel a
 * prediction (the predicted request stores its blocks again); a cleared or restarted replica
 * does. `expire` reclaims memory in routing order; reads never count an expired prediction.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import { BitsetTable } from './bitsetTable.ts';

export const DEFAULT_OVERLAY_TTL_MS = 2_000;

interface Prediction {
  keys: BlockKey[];
  expiresAtMs: number;
}

export class RouteOverlay {
  readonly ttlMs: number;
  /** Record: [key + 1, expiresAtMs, bitset...]. */
  readonly bits: BitsetTable;
  #pending: Prediction[] = [];
  #head = 0;

  constructor(replicaCount: number, ttlMs = DEFAULT_OVERLAY_TTL_MS) {
    this.ttlMs = ttlMs;
    this.bits = new BitsetTable(replicaCount, 2);
  }

  /** Keys with a prediction not yet reclaimed. */
  get size(): number {
    return this.bits.size;
  }

  /** Route predictions not yet reclaimed. */
  get pending(): number {
    return this.#pending.length - this.#head;
  }

  ensureReplicas(count: number): void {
    this.bits.widen(count);
  }

  /** Expiry of `slot`'s predictions. */
  expiresAtMs(slot: number): number {
    return this.bits.table.f64[slot * this.bits.table.strideF64 + 1]!;
  }

  /** Predicts `keys[fromBlock..]` cached on `replica` until nowMs + ttlMs. */
  add(replica: number, keys: readonly BlockKey[], fromBlock: number, nowMs: number): void {
    if (this.ttlMs <= 0 || fromBlock >= keys.length) return;
    const expiresAtMs = nowMs + this.ttlMs;
    const bits = this.bits;
    for (let i = fromBlock; i < keys.length; i++) {
      const slot = bits.insert(keys[i]!);
      const at = slot * bits.table.strideF64 + 1;
      const f64 = bits.table.f64;
      // Every earlier prediction of this key has expired: start a fresh set.
      if (f64[at]! <= nowMs) {
        const from = bits.bitsAt(slot);
        for (let w = 0; w < bits.words; w++) bits.table.i32[from + w] = 0;
      }
      f64[at] = expiresAtMs;
      bits.setBit(slot, replica);
    }
    this.#pending.push({ keys: keys.slice(fromBlock), expiresAtMs });
  }

  /** True when `key` is predicted on `replica` at `nowMs`. */
  has(key: BlockKey, replica: number, nowMs: number): boolean {
    const slot = this.bits.find(key);
    return slot >= 0 && this.expiresAtMs(slot) > nowMs && this.bits.testBit(slot, replica);
  }

  /** Reclaims keys whose predictions all expired by `nowMs`. */
  expire(nowMs: number): void {
    const pending = this.#pending;
    const table = this.bits.table;
    while (this.#head < pending.length && pending[this.#head]!.expiresAtMs <= nowMs) {
      for (const key of pending[this.#head]!.keys) {
        const slot = table.find(key);
        if (slot >= 0 && this.expiresAtMs(slot) <= nowMs) table.removeAt(slot);
      }
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > pending.length) {
      this.#pending = pending.slice(this.#head);
      this.#head = 0;
    }
  }

  /** Drops every prediction for `replica` (it restarted cold or left). */
  clearReplica(replica: number): void {
    this.bits.clearReplica(replica);
  }
}
