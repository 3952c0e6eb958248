/**
 * SGLang's KV event structs, transcribed from python/sglang/srt/disaggregation/kv_events.py for
 * the independent msgspec encoder (test/support/msgspec.ts), and SGLang's page hash chain
 * (python/sglang/srt/mem_cache/utils.py `get_hash_str`, `hash_str_to_int64`): tests build the
 * bytes an SGLang engine sends from these, not from kvroute's decoder's own reading.
 */
import { createHash } from 'node:crypto';
import { field, make, type Py, PyDict, PyFloat, type PyStruct, struct } from './msgspec.ts';

/**
 * Current SGLang: `EventBatch(array_like=True, gc=False)` with `attn_dp_rank`; events
 * `array_like=True, gc=False, tag=True` (no omit_defaults: every field is sent, medium too).
 * `BlockStoredWithMetadata` (tag "BlockStored", kw_only) appends `metadata`, a plain struct
 * (a map) holding `cache_salt`.
 */
export const SGL = (() => {
  const event = { arrayLike: true, tag: true };
  const head = ['block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id'];
  return {
    EventBatch: struct('KVEventBatch', { arrayLike: true }, [
      field('ts'),
      field('events'),
      field('attn_dp_rank', null),
    ]),
    BlockStored: struct('BlockStored', event, [
      ...head.map((n) => field(n)),
      field('medium', null),
    ]),
    BlockStoredWithMetadata: struct('BlockStored', event, [
      ...head.map((n) => field(n)),
      field('medium', null),
      field('metadata'),
    ]),
    BlockRemoved: struct('BlockRemoved', event, [field('block_hashes'), field('medium', null)]),
    AllBlocksCleared: struct('AllBlocksCleared', event, []),
  };
})();

/** SGLang before `medium` (and before dropping omit_defaults): `[ts, events]` may end early. */
export const SGL_OLD = (() => {
  const event = { arrayLike: true, tag: true, omitDefaults: true };
  return {
    EventBatch: struct('KVEventBatch', { arrayLike: true, omitDefaults: true }, [
      field('ts'),
      field('events'),
      field('attn_dp_rank', null),
    ]),
    BlockStored: struct(
      'BlockStored',
      event,
      ['block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id'].map((n) =>
        field(n),
      ),
    ),
    BlockRemoved: struct('BlockRemoved', event, [field('block_hashes')]),
    AllBlocksCleared: struct('AllBlocksCleared', event, []),
  };
})();

/** A page's SHA-256 digest, chained from the previous page's digest (null: the root). */
export function pageDigest(tokens: readonly number[], prior: Buffer | null): Buffer {
  const h = createHash('sha256');
  if (prior) h.update(prior);
  const word = Buffer.alloc(4);
  for (const t of tokens) {
    word.writeUInt32LE(t);
    h.update(word);
  }
  return h.digest();
}

/** `hash_str_to_int64`: the digest's first 8 bytes, big-endian, as a signed 64-bit integer. */
export const publishedHash = (digest: Buffer): bigint => digest.readBigInt64BE(0);

/** Digests and published hashes of the full pages of `tokens`, chained from `prior`. */
export function pageChain(
  tokens: readonly number[],
  pageSize: number,
  prior: Buffer | null = null,
): { digests: Buffer[]; hashes: bigint[] } {
  const digests: Buffer[] = [];
  let d = prior;
  for (let i = 0; i + pageSize <= tokens.length; i += pageSize) {
    d = pageDigest(tokens.slice(i, i + pageSize), d);
    digests.push(d);
  }
  return { digests, hashes: digests.map(publishedHash) };
}

export interface StoredArgs {
  hashes: readonly bigint[];
  parent: bigint | null;
  tokens: readonly number[];
  pageSize: number;
  medium?: string;
  cacheSalt?: string;
}

/** One BlockStored as `KVCacheEventRecorder.record_store` builds it (coalesced pages). */
export function sglStored(a: StoredArgs): PyStruct {
  const values: Record<string, Py> = {
    block_hashes: [...a.hashes],
    parent_block_hash: a.parent,
    token_ids: [...a.tokens],
    block_size: a.pageSize,
    lora_id: null,
    medium: a.medium ?? 'GPU',
  };
  if (a.cacheSalt === undefined) return make(SGL.BlockStored, values);
  return make(SGL.BlockStoredWithMetadata, {
    ...values,
    metadata: new PyDict([['cache_salt', a.cacheSalt]]),
  });
}

export const sglRemoved = (hashes: readonly bigint[], medium = 'GPU'): PyStruct =>
  make(SGL.BlockRemoved, { block_hashes: [...hashes], medium });

export const sglBatch = (events: PyStruct[], dpRank = 0, tsS = 1_767_000_000.25): PyStruct =>
  make(SGL.EventBatch, { ts: new PyFloat(tsS), events, attn_dp_rank: dpRank });
