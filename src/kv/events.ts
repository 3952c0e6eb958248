/**
 * KV cache events as plain data: the one schema shared by the block pool (which records them),
 * the engine server's ZMQ publisher (which encodes them in vLLM's wire format), the simulator
 * and the router's prefix index (which apply them). Keys are kvroute block keys; the wire codec
 * widens them to vLLM's 64-bit hashes.
 */
import type { BlockKey } from './blockKey.ts';

/** One or more newly full blocks, in chain order. */
export interface BlockStored {
  type: 'BlockStored';
  blockKeys: BlockKey[];
  /** Key of the block before the first one here, null when the first one starts a prompt. */
  parentKey: BlockKey | null;
  /**
   * Token ids of all the blocks, concatenated (blockKeys.length x blockSize). The block pool
   * hands out a view of the prompt when it holds an Int32Array (no copy per event).
   */
  tokenIds: readonly number[] | Int32Array;
  blockSize: number;
  loraName: string | null;
  /** Salt folded into the first block of a chain (vLLM carries it in extra_keys). */
  cacheSalt: string | null;
}

/** Cached blocks that were evicted (a free cached block was reused). */
export interface BlockRemoved {
  type: 'BlockRemoved';
  blockKeys: BlockKey[];
}

export interface AllBlocksCleared {
  type: 'AllBlocksCleared';
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;
