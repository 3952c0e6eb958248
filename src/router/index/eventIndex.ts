/**
 * Exact prefix index fed by engine KV events. Events already carry kvroute block keys (kvroute's
 * own engines, or a foreign engine's events after ForeignKeyMap translated them), so applying
 * one is a bit flip per block. It does not record routes: the overlay covers the gap until the
 * engine's events arrive.
 */
import type { BlockKey } from '../../kv/blockKey.ts';
import type { KvEvent } from '../../kv/events.ts';
import type { IndexMode } from '../defaults.ts';
import type { TierKeys } from './tierKeys.ts';
import type { PrefixIndex } from './prefixIndex.ts';
import { TieredIndex } from './tieredIndex.ts';

/** Its CPU tier (`cpuBlocks`) is what events with medium "CPU" store. */
export class EventIndex extends TieredIndex implements PrefixIndex {
  readonly mode: IndexMode = 'events';

  /**
   * `sharedKeys` (a ForeignKeyMap's, for its translated events; null for kvroute's own): a
   * replica holds a key as one bit, so a store of a key it already holds counts one more engine
   * hash for it there, and a removal takes one back before it clears the bit (two engine hashes,
   * e.g. differing extra keys, can share one router key). The usual key has one hash and no
   * entry: a store finds its bit clear, a removal finds the map empty.
   */
  applyEvents(
    replica: number,
    events: readonly KvEvent[],
    sharedKeys: Map<BlockKey, number> | null = null,
  ): number {
    let changed = 0;
    // Each event's table slots are warmed while the event before it is applied, so their cache
    // misses overlap that work instead of stalling the first probes of their own event.
    if (events.length > 0) this.#prefetch(events[0]!, replica);
    for (let e = 0; e < events.length; e++) {
      const event = events[e]!;
      if (e + 1 < events.length) this.#prefetch(events[e + 1]!, replica);
      if (event.type !== 'AllBlocksCleared' && event.medium === 'CPU') {
        changed += applyTier(this.cpuBlocks, replica, event);
        continue;
      }
      switch (event.type) {
        case 'BlockStored': {
          const keys = event.blockKeys;
          for (let i = 0; i < keys.length; i++) {
            const key = keys[i]!;
            if (this.blocks.add(key, replica)) changed++;
            else if (sharedKeys !== null) sharedKeys.set(key, (sharedKeys.get(key) ?? 0) + 1);
          }
          break;
        }
        case 'BlockRemoved': {
          const keys = event.blockKeys;
          for (let i = 0; i < keys.length; i++) {
            const key = keys[i]!;
            if (sharedKeys !== null && sharedKeys.size > 0 && release(sharedKeys, key)) continue;
            if (this.blocks.remove(key, replica)) changed++;
          }
          break;
        }
        case 'AllBlocksCleared':
          changed += this.blocks.blockCount(replica) + this.cpuBlocks.blockCount(replica);
          this.blocks.clearReplica(replica);
          this.cpuBlocks.clearReplica(replica);
          sharedKeys?.clear();
          break;
      }
    }
    return changed;
  }

  #prefetch(event: KvEvent, replica: number): void {
    if (event.type === 'AllBlocksCleared') return;
    if (event.medium === 'CPU') this.cpuBlocks.warm(event.blockKeys, replica);
    else this.blocks.prefetch(event.blockKeys);
  }

  recordRoute(_replica: number, _keys: readonly BlockKey[]): void {}
}

/** Takes back one of `key`'s shared hashes; false when it has none (its bit is its last). */
function release(sharedKeys: Map<BlockKey, number>, key: BlockKey): boolean {
  const shared = sharedKeys.get(key);
  if (shared === undefined) return false;
  if (shared > 1) sharedKeys.set(key, shared - 1);
  else sharedKeys.delete(key);
  return true;
}

/** A CPU-tier store or removal: pairs in the tier's own set. */
function applyTier(
  tier: TierKeys,
  replica: number,
  event: Exclude<KvEvent, { type: 'AllBlocksCleared' }>,
): number {
  let changed = 0;
  const keys = event.blockKeys;
  if (event.type === 'BlockStored') {
    for (let i = 0; i < keys.length; i++) if (tier.add(keys[i]!, replica)) changed++;
  } else {
    for (let i = 0; i < keys.length; i++) if (tier.remove(keys[i]!, replica)) changed++;
  }
  return changed;
}
