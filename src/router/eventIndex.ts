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

  constructor(replicaCount: number, expectedKeys = 0) {
    this.blocks = new BlockIndex(replicaCount, expectedKeys);
  }

  ensureReplicas(count: number): void {
    this.blocks.ensureReplicas(count);
  }

  applyEvents(replica: number, events: readonly KvEvent[]): number {
    let changed = 0;
    for (const event of events) {
      switch (event.type) {
        case 'BlockStored':
          this.blocks.prefetch(event.blockKeys);
          for (const key of event.blockKeys) if (this.blocks.add(key, replica)) changed++;
          break;
        case 'BlockRemoved':
          this.blocks.prefetch(event.blockKeys);
          for (const key of event.blockKeys) if (this.blocks.remove(key, replica)) changed++;
          break;
        case 'AllBlocksCleared':
          changed += this.blocks.blockCount(replica);
          this.blocks.clearReplica(replica);
          break;
      }
    }
    return changed;
  }

  recordRoute(_replica: number, _keys: readonly BlockKey[]): void {}

  clearReplica(replica: number): void {
    this.blocks.clearReplica(replica);
  }

  blockCount(replica: number): number {
    return this.blocks.blockCount(replica);
  }
}
