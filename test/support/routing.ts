/** Requests and KV events built from deterministic token ids, shared by the router tests. */
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import type { KvEvent } from '../../src/kv/events.ts';
import { idleReplicaView, type ReplicaView, type RouteRequest } from '../../src/router/index.ts';

export const BLOCK = 16;

/** `count` token ids, a different stream per seed (`salt` varies the vocabulary per suite). */
export function tokens(seed: number, count: number, salt = 3, vocab = 70_000): number[] {
  return Array.from({ length: count }, (_, i) => (seed * 7919 + i * 104_729 + salt) % vocab);
}

export function request(id: string, toks: number[]): RouteRequest {
  return {
    id,
    blockKeys: computeBlockKeys(toks, BLOCK),
    promptTokens: toks.length,
    blockSize: BLOCK,
  };
}

/** The BlockStored event an engine publishes after prefilling `toks` (full blocks only). */
export function stored(toks: number[], keys = computeBlockKeys(toks, BLOCK)): KvEvent {
  return {
    type: 'BlockStored',
    blockKeys: keys,
    parentKey: null,
    tokenIds: toks.slice(0, keys.length * BLOCK),
    blockSize: BLOCK,
    loraName: null,
    cacheSalt: null,
  };
}

/** A policy's view of replica `id`: idle, empty cache, unless `fields` say otherwise. */
export function replicaView(id: number, fields: Partial<ReplicaView> = {}): ReplicaView {
  const v = { ...idleReplicaView(id, `r${id}`), ...fields };
  return { ...v, cachedTokens: v.cachedBlocks * BLOCK, cpuCachedTokens: v.cpuCachedTokens ?? 0 };
}
