/**
 * Predict-on-route overlay: the blocks of a just-routed request count as cached on its replica
 * for `ttlMs`, until the engine's own KV events arrive, so siblings of one prefix sent in a burst
 * do not scatter across cold replicas. An eviction event does not cancel a prediction (the
 * predicted request stores its blocks again); a cleared or restarted replica does. Reads never
 * count an expired prediction; `expire` reclaims memory in routing order.
 *
 * A prediction is kept whole, as the route made it: replica, expiry, and the request's block keys
 * from the first block not already cached there. Recording one copies those keys and touches one
 * table entry: no per-block hashing, which on a cold table cost a cache miss per block. Walks
 * find predictions by their first key instead: block keys chain, so a prediction covers block i
 * of a request only if it starts at one of the request's blocks 0..i, at the same position, and
 * agrees with it up to i. A small table maps a first key to the newest prediction starting there;
 * older ones with the same first key are linked from it.
 */
import type { BlockKey } from '../../kv/blockKey.ts';
import { DEFAULT_OVERLAY_TTL_MS } from '../defaults.ts';
import { SlotTable } from './slotTable.ts';

/**
 * Buckets of the first-key filter (a power of two). A walk reads one bit per block, so the
 * filter's bits (16 KiB) stay in the first-level cache; the counts behind them are touched only
 * when a prediction is added or reclaimed. With 4,096 buckets, a 352-replica simulation probed
 * the table at a quarter of its walk steps, and 99.9 % of the probes found nothing.
 */
const START_BUCKETS = 1 << 17;

export interface Prediction {
  /** -1 once its replica was cleared. */
  replica: number;
  /** Position of keys[0] in the routed request. */
  readonly fromBlock: number;
  readonly keys: readonly BlockKey[];
  readonly expiresAtMs: number;
  /** Id of the next older prediction with the same first key (-1: none). */
  readonly older: number;
}

export class RouteOverlay {
  readonly ttlMs: number;
  /** Predictions oldest first; ids count up from 0, #queue[i] has id #firstId + i. */
  #queue: Prediction[] = [];
  #firstId = 0;
  #head = 0;
  /** First key -> newest pending prediction starting there. Record: [key + 1, id + 1]. */
  #starts = new SlotTable(2);
  /**
   * Pending predictions per bucket of first keys' low bits: a walk asks the table above only
   * for a block whose bucket is not empty, one load instead of a probe for most blocks.
   */
  #startCounts = new Int32Array(START_BUCKETS);
  /** Bucket b's bit (word b >>> 5) is set while its count is not 0: what walks read. */
  #startBits = new Int32Array(START_BUCKETS >>> 5);
  #walk = new PredictionWalk(this);

  constructor(ttlMs = DEFAULT_OVERLAY_TTL_MS) {
    this.ttlMs = ttlMs;
  }

  /**
   * One bit per bucket of first keys, set while a pending prediction starts in it, read only: a
   * walk calls `enter` only for a block whose bucket's bit is set (`mayStartAt`).
   */
  get startBits(): Int32Array {
    return this.#startBits;
  }

  /** Route predictions not yet reclaimed. */
  get pending(): number {
    return this.#queue.length - this.#head;
  }

  /** Predicts `keys[fromBlock..]` cached on `replica` until nowMs + ttlMs. */
  add(replica: number, keys: readonly BlockKey[], fromBlock: number, nowMs: number): void {
    if (this.ttlMs <= 0 || fromBlock >= keys.length) return;
    this.addTail(replica, keys.slice(fromBlock), fromBlock, nowMs);
  }

  /**
   * Predicts `tail` (a request's block keys from position `fromBlock` on) cached on `replica`
   * until nowMs + ttlMs. The overlay keeps `tail` as it is: the caller must not change it.
   */
  addTail(replica: number, tail: readonly BlockKey[], fromBlock: number, nowMs: number): void {
    if (this.ttlMs <= 0 || tail.length === 0) return;
    const id = this.#firstId + this.#queue.length;
    const slot = this.#starts.insert(tail[0]!);
    const f64 = this.#starts.f64;
    // A new record's payload is 0, so `older` is -1.
    const older = f64[slot * 2 + 1]! - 1;
    f64[slot * 2 + 1] = id + 1;
    const bucket = startBucketOf(tail[0]!);
    if (this.#startCounts[bucket]!++ === 0) {
      this.#startBits[bucket >>> 5]! |= 1 << (bucket & 31);
    }
    this.#queue.push({
      replica,
      fromBlock,
      keys: tail,
      expiresAtMs: nowMs + this.ttlMs,
      older,
    });
  }

  /** Reclaims predictions expired by `nowMs`. */
  expire(nowMs: number): void {
    const queue = this.#queue;
    const starts = this.#starts;
    while (this.#head < queue.length && queue[this.#head]!.expiresAtMs <= nowMs) {
      const id = this.#firstId + this.#head;
      const first = queue[this.#head]!.keys[0]!;
      const bucket = startBucketOf(first);
      if (--this.#startCounts[bucket]! === 0) {
        this.#startBits[bucket >>> 5]! &= ~(1 << (bucket & 31));
      }
      const slot = starts.find(first);
      // Only the newest prediction with its first key is in the table; older ones are not.
      if (slot >= 0 && starts.f64[slot * 2 + 1] === id + 1) starts.removeAt(slot);
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > queue.length) {
      this.#queue = queue.slice(this.#head);
      this.#firstId += this.#head;
      this.#head = 0;
    }
  }

  /** Drops every prediction for `replica` (it restarted cold or left). */
  clearReplica(replica: number): void {
    for (let i = this.#head; i < this.#queue.length; i++) {
      const prediction = this.#queue[i]!;
      if (prediction.replica === replica) prediction.replica = -1;
    }
  }

  /** The overlay's side of one prefix walk (one at a time: the same object is reused). */
  walk(): PredictionWalk {
    this.#walk.reset();
    return this.#walk;
  }

  /** Newest pending prediction whose first key is `key`, or null. */
  newestStartingAt(key: BlockKey): Prediction | null {
    if (!mayStartAt(this.#startBits, key)) return null;
    const slot = this.#starts.find(key);
    return slot < 0 ? null : this.byId(this.#starts.f64[slot * 2 + 1]! - 1);
  }

  /** The pending prediction with id `id`, or null (reclaimed, or -1). */
  byId(id: number): Prediction | null {
    const at = id - this.#firstId;
    return at >= this.#head ? this.#queue[at]! : null;
  }
}

/**
 * Predictions that may cover the block a prefix walk is at: those met at their first key on an
 * earlier or the current block, until they end or part from the request's chain.
 */
export class PredictionWalk {
  #overlay: RouteOverlay;
  #met: Prediction[] = [];

  constructor(overlay: RouteOverlay) {
    this.#overlay = overlay;
  }

  reset(): void {
    this.#met.length = 0;
  }

  /** The walk reached block `block` with key `key`: take in predictions starting there. */
  enter(key: BlockKey, block: number): void {
    let prediction = this.#overlay.newestStartingAt(key);
    while (prediction !== null) {
      if (prediction.fromBlock === block) this.#met.push(prediction);
      prediction = this.#overlay.byId(prediction.older);
    }
  }

  /** ORs into `held` the replicas with a live prediction of the current block. */
  orPredicted(key: BlockKey, block: number, nowMs: number, held: Int32Array): void {
    const met = this.#met;
    for (let m = met.length - 1; m >= 0; m--) {
      const prediction = met[m]!;
      const offset = block - prediction.fromBlock;
      if (offset >= prediction.keys.length || prediction.keys[offset] !== key) {
        // Ended, or parted from this chain: it cannot cover any later block either.
        met[m] = met[met.length - 1]!;
        met.pop();
        continue;
      }
      const replica = prediction.replica;
      if (replica >= 0 && prediction.expiresAtMs > nowMs) {
        held[replica >>> 5] = held[replica >>> 5]! | (1 << (replica & 31));
      }
    }
  }
}

/** A first key's bucket in the overlay's filter. */
function startBucketOf(key: BlockKey): number {
  return (key >>> 0) & (START_BUCKETS - 1);
}

/** Whether a pending prediction may start at `key`: its bucket's bit in `startBits`. */
export function mayStartAt(startBits: Int32Array, key: BlockKey): boolean {
  const bucket = startBucketOf(key);
  return (startBits[bucket >>> 5]! & (1 << (bucket & 31))) !== 0;
}
