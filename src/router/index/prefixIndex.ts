/**
 * The router's view of what each replica has cached, behind one interface with two feeds:
 * - 'events': exact, fed by the engines' KV events (stored / removed / cleared);
 * - 'approx': what the router itself sent where, forgotten per replica in LRU order beyond a
 *   capacity in blocks, as the engine would have evicted it. Accepts some false hits.
 * Both answer prefix queries through the same BlockIndex, walked by `matchPrefix`.
 */
import type { BlockKey } from '../../kv/blockKey.ts';
import type { KvEvent } from '../../kv/events.ts';
import type { ApproxForgetting } from './approxForgetting.ts';

import type { BlockIndex } from './blockIndex.ts';
import type { TierKeys } from './tierKeys.ts';
import type { IndexMode } from '../defaults.ts';

export interface PrefixIndex {
  readonly mode: IndexMode;
  /** Key -> replicas, for the prefix walk. */
  readonly blocks: BlockIndex;
  /** Makes room for replica ids below `count`. */
  ensureReplicas(count: number): void;
  /**
   * Applies an engine's KV events (kvroute keys); returns blocks added plus removed.
   * `sharedKeys`: see EventIndex.applyEvents.
   */
  applyEvents(
    replica: number,
    events: readonly KvEvent[],
    sharedKeys?: Map<BlockKey, number> | null,
  ): number;
  /**
   * Records that `keys` were sent to `replica` at `nowMs` (the approximate index's clock);
   * `keys[0]` is the prompt's block `fromBlock` (default 0: the whole prompt).
   */
  recordRoute(replica: number, keys: readonly BlockKey[], nowMs?: number, fromBlock?: number): void;
  /** Forgets what is due at `nowMs` (the approximate index with a TTL or a sweep). */
  forget?(nowMs: number): void;
  /** Forgets everything on `replica` (it restarted cold or left). */
  clearReplica(replica: number): void;
  /** Blocks indexed on `replica` (its tree size). */
  blockCount(replica: number): number;
  /**
   * Blocks in `replica`'s CPU tier, keyed as `blocks` (the events index: medium "CPU"; the
   * approximate index: its modelled tier, empty for a replica not told one).
   */
  readonly cpuBlocks?: TierKeys;
  cpuBlockCount?(replica: number): number;
  /**
   * Gives `replica` a modelled CPU tier of `blocks` blocks (the approximate index, which has no
   * events to learn it from); absent where the tier is learned from the events.
   */
  setCpuCapacity?(replica: number, blocks: number): void;
  /** Sizes `replica`'s GPU record in blocks (the approximate index; the events index has none). */
  setGpuCapacity?(replica: number, blocks: number): void;
}

export interface PrefixIndexOptions {
  /** Approx mode: blocks remembered per replica before LRU forgetting. */
  capacityBlocks?: number;
  /** Pre-size the table for this many distinct keys. */
  expectedKeys?: number;
  /** Approx mode: how the record forgets (a peer's; default LRU at `capacityBlocks`). */
  forgetting?: ApproxForgetting;
}
