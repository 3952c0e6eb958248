/**
 * KV cache events as plain data: the one schema shared by the block pool (which records them),
 * the engine server's ZMQ publisher (which encodes them in vLLM's wire format), the simulator
 * and the router's prefix index (which apply them). Keys are kvroute block keys; the wire codec
 * widens them to vLLM's 64-bit hashes.
 */
import type { BlockKey } from './blockKey.ts';

/**
 * Where a block lives, as vLLM's events name it (`medium`): "GPU" for the engine's own pool
 * (`MEDIUM_GPU` in kv_events.py), "CPU" for the OffloadingConnector's host tier
 * (`CPULoadStoreSpec.medium()` in vllm/v1/kv_offload/mediums.py).
 */
export type KvMedium = 'GPU' | 'CPU';

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
  /**
   * Absent: GPU. A CPU-tier store carries no token ids and no parent, as vLLM's
   * OffloadingConnector sends it (`take_events`): the blocks are known from their GPU store.
   */
  medium?: KvMedium;
}

/** Cached blocks that were evicted (a free cached block was reused). */
export interface BlockRemoved {
  type: 'BlockRemoved';
  blockKeys: BlockKey[];
  /** Absent: GPU. */
  medium?: KvMedium;
}

export interface AllBlocksCleared {
  type: 'AllBlocksCleared';
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;

/** A CPU tier's store of `blockKeys`, as vLLM's OffloadingConnector records one: hashes only. */
export function cpuTierStored(blockKeys: BlockKey[], blockSize: number): BlockStored {
  return {
    type: 'BlockStored',
    blockKeys,
    parentKey: null,
    tokenIds: [],
    blockSize,
    loraName: null,
    cacheSalt: null,
    medium: 'CPU',
  };
}
