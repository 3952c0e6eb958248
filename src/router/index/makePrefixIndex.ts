/**
 * The prefix index a mode asks for: from the engines' KV events, or approximate from the router's
 * own routes.
 */
import { ApproxIndex } from './approxIndex.ts';
import type { IndexMode } from '../defaults.ts';
import { EventIndex } from './eventIndex.ts';
import type { PrefixIndex, PrefixIndexOptions } from './prefixIndex.ts';

export function makePrefixIndex(
  mode: IndexMode,
  replicaCount: number,
  options: PrefixIndexOptions = {},
): PrefixIndex {
  return mode === 'events'
    ? new EventIndex(replicaCount, options.expectedKeys)
    : new ApproxIndex(
        replicaCount,
        options.capacityBlocks,
        options.expectedKeys,
        options.forgetting,
      );
}
