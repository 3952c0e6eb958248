/**
 * Exact prefix index fed by engine KV events. Events already carry kvroute block keys (kvroute's
 * own engines, or a foreign engine's events after ForeignKeyMap translated them), so applying
 * one is a bit flip per block. It does not record routes: the overlay covers the gap until the
 * engine's events arrive.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { KvEvent } from '../kv/events.ts';
import { BlockIndex } from './blockIndex.ts';
import type { IndexMode } from './defaults.ts';
import type { PrefixIndex } from './prefixIndex.ts';

export class EventIndex implements PrefixIndex {
  readonly mode: IndexMode = 'events';
  readonly blocks: BlockIndex;
  /** Blocks in each replica's CPU tier (events with medium "CPU"); empty without one. */
  readonly cpuBlocks: BlockIndex;

  constructor(replicaCount: number, expectedKeys = 0) {
    this.blocks = new BlockIndex(replicaCount, expectedKeys);
    this.cpuBlocks = new BlockIndex(replicaCount);
  }

  ensureReplicas(count: number): void {
    this.blocks.ensureReplicas(count);
    this.cpuBlocks.ensureReplicas(count);
  }

  applyEvents(replica: number, events: readonly KvEvent[]): number {
    let changed = 0;
    // Each event's table slots are warmed while the event before it is applied, so their cache
    // misses overlap that work instead of stalling the first probes of their own event.
    if (events.length > 0) this.#prefetch(events[0]!);
    for (let e = 0; e < events.length; e++) {
      const event = events[e]!;
      if (e + 1 < events.length) this.#prefetch(events[e + 1]!);
      if (event.type !== 'AllBlocksCleared' && event.medium === 'CPU') {
        changed += applyTier(this.cpuBlocks, replica, event);
        continue;
      }
      switch (event.type) {
        case 'BlockStored': {
          const keys = event.blockKeys;
          for (let i = 0; i < keys.length; i++) if (this.blocks.add(keys[i]!, replica)) changed++;
          break;
        }
        case 'BlockRemoved': {
          const keys = event.blockKeys;
          for (let i = 0; i < keys.length; i++) {
            if (this.blocks.remove(keys[i]!, replica)) changed++;
          }
          break;
        }
        case 'AllBlocksCleared':
          changed += this.blocks.blockCount(replica) + this.cpuBlocks.blockCount(replica);
          this.blocks.clearReplica(replica);
          this.cpuBlocks.clearReplica(replica);
          break;
      }
    }
    return changed;
  }

  #prefetch(event: KvEvent): void {
    if (event.type === 'AllBlocksCleared') return;
    (event.medium === 'CPU' ? this.cpuBlocks : this.blocks).prefetch(event.blockKeys);
  }

  recordRoute(_replica: number, _keys: readonly BlockKey[]): void {}

  clearReplica(replica: number): void {
    this.blocks.clearReplica(replica);
    this.cpuBlocks.clearReplica(replica);
  }

  blockCount(replica: number): number {
    return this.blocks.blockCount(replica);
  }

  cpuBlockCount(replica: number): number {
    return this.cpuBlocks.blockCount(replica);
  }
}

/** A CPU-tier store or removal: bits in the tier's own index. */
function applyTier(
  tier: BlockIndex,
  replica: number,
  event: Exclude<KvEvent, { type: 'AllBlocksCleared' }>,
): number {
  let changed = 0;
  const stored = event.type === 'BlockStored';
  for (const key of event.blockKeys) {
    if (stored ? tier.add(key, replica) : tier.remove(key, replica)) changed++;
  }
  return changed;
}
