/**
 * SGLang's KV event wire format, decoded (pure; no sockets, no state).
 *
 * What SGLang sends (python/sglang/srt/disaggregation/kv_events.py, msgspec structs):
 * - ZMQ frames as vLLM's publisher: topic, sequence (8 bytes big-endian, from 0 per publisher),
 *   payload. With a snapshot endpoint configured the topic frame carries metadata after the
 *   configured topic: `topic + "\0sgl-kv-epoch=" + epoch`, and a snapshot barrier (an empty
 *   batch) adds `"\0sgl-kv-snapshot=" + id` (`parseSglangTopic`).
 * - Replay: `[empty, seq, payload]` per batch, then `[empty, -1 (0xFF x 8), ""]`: the older,
 *   topic-less form, which kv/wire.ts's `readReplayReply` already reads.
 * - Payload: `KVEventBatch(ts, events, attn_dp_rank)`, `array_like=True`. Newer SGLang drops
 *   `omit_defaults`, so the rank is always there (set by `ZmqEventPublisher.publish`); older
 *   SGLang may omit it.
 * - Events: `array_like=True, tag=True`, the tag first:
 *   `["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]`,
 *   and `BlockStoredWithMetadata` (same tag) appends a map `{"cache_salt": ...}`;
 *   `["BlockRemoved", block_hashes, medium]`; `["AllBlocksCleared"]`. Older SGLang has no
 *   `medium` (BlockStored of 6 items, BlockRemoved of 2).
 * - Hashes are signed int64 (`hash_str_to_int64`: the first 8 bytes of a SHA-256 page digest),
 *   so half of them are negative on the wire; read here as their unsigned 64-bit pattern.
 * - A "block" is one radix-cache page (`--page-size`, 1 by default): `block_size` is the page's
 *   token count, and `mem_cache/events.py` coalesces consecutive pages of one chain into one
 *   event (`token_ids` = pages x page size). In EAGLE bigram mode each token is a pair
 *   `(token, next_token)`; the first of the pair is the token at that position.
 * - `medium`: "GPU" (device pool), "CPU_PINNED" (HiCache host tier), "DISK", "EXTERNAL".
 */
import { Unpackr } from 'msgpackr/unpack';
import { decodeBatchEvents, fieldReaders, isRecord, optString } from '../../kv/wireFields.ts';

export class SglangWireError extends Error {
  readonly code = 'ERR_SGLANG_WIRE_DECODE';
}

export interface SglangBlockStored {
  type: 'BlockStored';
  /** One hash per page, unsigned 64-bit pattern of SGLang's signed int64. */
  pageHashes: bigint[];
  parentPageHash: bigint | null;
  /** Token ids of all the pages, concatenated (pageHashes.length x pageSize). */
  tokenIds: number[];
  pageSize: number;
  loraId: number | null;
  /** null: not sent (older SGLang, which only had the device pool). */
  medium: string | null;
  /** From `BlockStoredWithMetadata.metadata.cache_salt`; null when absent. */
  cacheSalt: string | null;
}

export interface SglangBlockRemoved {
  type: 'BlockRemoved';
  pageHashes: bigint[];
  medium: string | null;
}

export interface SglangAllBlocksCleared {
  type: 'AllBlocksCleared';
}

export type SglangEvent = SglangBlockStored | SglangBlockRemoved | SglangAllBlocksCleared;

export interface SglangEventBatch {
  tsS: number;
  events: SglangEvent[];
  /** `attn_dp_rank`: the attention-DP rank (or plain DP rank) that published; null if absent. */
  dpRank: number | null;
  /** Events with a tag this decoder does not know (skipped). */
  skippedEvents: number;
  /** Events refused on their values (none of them applied). */
  malformedEvents: number;
  malformedReason: string | null;
}

const unpackr = new Unpackr({ mapsAsObjects: true, useRecords: false, int64AsType: 'bigint' });

class MalformedEvent extends SglangWireError {}
const read = fieldReaders(MalformedEvent);

/** Decodes one payload frame; throws SglangWireError on a payload that is no batch at all. */
export function decodeSglangBatch(payload: Uint8Array): SglangEventBatch {
  const raw = unpacked(payload);
  if (!Array.isArray(raw)) throw new SglangWireError('batch is not an array');
  const [ts, events, dpRank] = raw;
  if (!Array.isArray(events)) throw new SglangWireError('batch has no events list');
  const tsS = read.optNumber(ts, 'ts') ?? 0;
  const attnDpRank = read.optNumber(dpRank, 'attn_dp_rank');
  return decodeBatchEvents(tsS, attnDpRank, events, decodeEvent, SglangWireError);
}

/** The msgpack value of a payload frame; SglangWireError when it is none. */
function unpacked(payload: Uint8Array): unknown {
  try {
    return unpackr.unpack(payload);
  } catch (err) {
    throw new SglangWireError(`payload is not msgpack: ${(err as Error).message}`);
  }
}

function decodeEvent(raw: unknown): SglangEvent | null {
  if (!Array.isArray(raw)) throw new MalformedEvent('event is not an array');
  switch (raw[0]) {
    case 'BlockStored':
      return decodeStored(raw);
    case 'BlockRemoved':
      return {
        type: 'BlockRemoved',
        pageHashes: read.hashes(raw[1], hash),
        medium: optString(raw[2]),
      };
    case 'AllBlocksCleared':
      return { type: 'AllBlocksCleared' };
    default:
      return null;
  }
}

function decodeStored(raw: unknown[]): SglangBlockStored {
  const pageHashes = read.hashes(raw[1], hash);
  const parent = raw[2] === undefined || raw[2] === null ? null : hash(raw[2]);
  if (!Array.isArray(raw[3])) throw new MalformedEvent('BlockStored without token_ids');
  const tokenIds = raw[3].map(tokenOf);
  const pageSize = read.number(raw[4], 'block_size');
  if (!(Number.isSafeInteger(pageSize) && pageSize >= 1)) {
    throw new MalformedEvent(`BlockStored with block_size ${pageSize} (an integer >= 1)`);
  }
  if (tokenIds.length !== pageHashes.length * pageSize) {
    throw new MalformedEvent(
      `BlockStored with ${tokenIds.length} token ids for ${pageHashes.length} pages of ${pageSize}`,
    );
  }
  const metadata = raw[7];
  const salt = isRecord(metadata) ? metadata.cache_salt : undefined;
  return {
    type: 'BlockStored',
    pageHashes,
    parentPageHash: parent,
    tokenIds,
    pageSize,
    loraId: read.optNumber(raw[5], 'lora_id'),
    medium: optString(raw[6]),
    cacheSalt: typeof salt === 'string' ? salt : null,
  };
}

/** A token id, or the first of an EAGLE bigram pair. */
function tokenOf(t: unknown): number {
  const v = Array.isArray(t) ? t[0] : t;
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) {
    throw new MalformedEvent(`BlockStored with token id ${String(v)} (integers >= 0)`);
  }
  return n;
}

/** SGLang's signed int64 as its unsigned bit pattern. */
function hash(v: unknown): bigint {
  if (typeof v === 'bigint') return BigInt.asUintN(64, v);
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt.asUintN(64, BigInt(v));
  throw new MalformedEvent(`block hash of type ${typeof v}`);
}

/** The configured topic and the metadata SGLang appends to it (see the file comment). */
export interface SglangTopic {
  topic: string;
  /** The publisher's lifecycle token; null without a snapshot endpoint. */
  epoch: string | null;
  /** Set on a snapshot barrier (an empty batch that marks a placement cut). */
  snapshotBarrier: string | null;
}

const EPOCH_MARKER = '\0sgl-kv-epoch=';
const SNAPSHOT_MARKER = '\0sgl-kv-snapshot=';

export function parseSglangTopic(frame: Uint8Array): SglangTopic {
  const text = Buffer.from(frame.buffer, frame.byteOffset, frame.length).toString('utf8');
  const at = text.indexOf(EPOCH_MARKER);
  if (at < 0) return { topic: text, epoch: null, snapshotBarrier: null };
  const rest = text.slice(at + EPOCH_MARKER.length);
  const barrier = rest.indexOf(SNAPSHOT_MARKER);
  return {
    topic: text.slice(0, at),
    epoch: barrier < 0 ? rest : rest.slice(0, barrier),
    snapshotBarrier: barrier < 0 ? null : rest.slice(barrier + SNAPSHOT_MARKER.length),
  };
}
