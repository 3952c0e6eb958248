/**
 * A consistent-hash ring of virtual nodes over the whole fleet (filtered replicas stay on it and
 * are skipped during the walk, so a filter does not move every other key). 32-bit FNV-1a of
 * "name#i" per virtual node, mixed with a murmur3 finalizer; keys hash their block key.
 */
import type { BlockKey } from '../../kv/blockKey.ts';
import type { RouteRequest } from '../policy.ts';

/** Virtual nodes per endpoint, as KubeAI's CHWBL. */
export const DEFAULT_VIRTUAL_NODES = 256;
/** Blocks of prompt prefix that name the key: 32 x 16 = 512 tokens, inside any system prompt. */
export const DEFAULT_HASH_PREFIX_BLOCKS = 32;

export function fmix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

export function hashString32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return fmix32(h);
}

export function hashKey32(key: BlockKey): number {
  return fmix32((key >>> 0) ^ Math.imul((key / 4294967296) | 0, 0x9e3779b1));
}

/**
 * Hash of the request's block-aligned prefix: the key of block min(blocks, prefixBlocks) - 1,
 * which chains every block before it. A prompt shorter than one block hashes its tenant,
 * customer or id instead.
 */
export function prefixHash(request: RouteRequest, prefixBlocks: number): number {
  const blocks = Math.min(request.blockKeys.length, prefixBlocks);
  if (blocks > 0) return hashKey32(request.blockKeys[blocks - 1]!);
  return hashString32(request.tenant ?? request.customer ?? request.id);
}

export class HashRing {
  readonly version: number;
  #hashes: Uint32Array;
  #owners: Int32Array;

  constructor(fleet: readonly (string | null)[], version: number, virtualNodes: number) {
    this.version = version;
    const nodes: [number, number][] = [];
    fleet.forEach((name, id) => {
      if (name === null) return;
      for (let v = 0; v < virtualNodes; v++) nodes.push([hashString32(`${name}#${v}`), id]);
    });
    nodes.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    this.#hashes = Uint32Array.from(nodes, (n) => n[0]);
    this.#owners = Int32Array.from(nodes, (n) => n[1]);
  }

  /**
   * Replica ids clockwise from `hash`, each once, until `accept` returns true; returns that id
   * or -1 when none is accepted.
   */
  walk(hash: number, accept: (id: number) => boolean): number {
    const n = this.#hashes.length;
    if (n === 0) return -1;
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#hashes[mid]! < hash) lo = mid + 1;
      else hi = mid;
    }
    const seen = new Set<number>();
    for (let step = 0; step < n; step++) {
      const id = this.#owners[(lo + step) % n]!;
      if (seen.has(id)) continue;
      seen.add(id);
      if (accept(id)) return id;
    }
    return -1;
  }
}
