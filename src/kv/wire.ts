/**
 * vLLM's KV event wire format: the encoder the engine server publishes with and the tolerant
 * decoder the gateway's subscriber reads any vLLM-compatible engine with.
 *
 * What vLLM sends (vllm/distributed/kv_events.py, msgspec structs, `omit_defaults=True`):
 * - ZMQ frames: topic (UTF-8, "" by default), sequence (8 bytes big-endian, from 0 at each
 *   start), payload.
 * - Replay: a ROUTER answers a DEALER's `[empty, start_seq]` with one message per buffered batch
 *   from start_seq on, then an end marker whose sequence frame is -1 (0xFF x 8). vLLM >= 0.26
 *   (PR #45177) sends `[empty, topic, seq, payload]` and ends `[empty, "", END_SEQ, ""]`; older
 *   vLLM and SGLang send `[empty, seq, payload]` and end `[empty, END_SEQ, ""]`.
 *   `readReplayReply` tells the two apart by frame count.
 * - Payload: `EventBatch(ts, events, data_parallel_rank)`, `array_like=True`, so
 *   `[ts: float64, [events...], dp_rank]` in every version.
 * - Events: a tagged union. vLLM < 0.26 (`array_like=True, tag=True`) sends positional arrays
 *   with the tag first: `["BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
 *   lora_id, medium, lora_name, extra_keys?]`, `["BlockRemoved", block_hashes, medium]`,
 *   `["AllBlocksCleared"]`; vLLM >= 0.26 (PR #42892) sends maps with a `"type"` key and adds
 *   `group_idx` and `kv_cache_spec_kind` (hybrid models: one KV cache group per attention kind).
 *   Defaulted trailing fields may be absent; producers may add fields at any time.
 * - Hashes: `ExternalBlockHash = bytes | int`; as ints they are unsigned 64-bit (msgpack uint64
 *   above 2^63). vLLM's own int form is the last 8 bytes of the hash, big-endian, which is also
 *   how this decoder folds raw-bytes hashes into a bigint.
 * - extra_keys: one entry per block, `None` or a tuple of (LoRA name, multimodal keys,
 *   cache_salt, prompt-embeds digests); cache_salt only in the block that starts the prompt.
 *   vLLM versions that have the field always send the list, one entry per block, and so does
 *   this encoder in both forms.
 *
 * The encoder's two forms: `map` is vLLM >= 0.26 byte for byte (BlockStored with `group_idx: 0`
 * and `kv_cache_spec_kind: "full_attention"`, BlockRemoved with `group_idx: 0`, as the v0.26.0
 * block pool emits them for a model with one KV cache group); `array` is the last array_like
 * vLLM before group_idx (tag + 8 fields).
 */
import { Unpackr } from 'msgpackr/unpack';
import { type BlockKey, toWireHash } from './blockKey.ts';
import type { KvEvent } from './events.ts';
import { decodeBatchEvents, fieldReaders, isRecord, optString } from './wireFields.ts';
import { MsgpackWriter } from './wireMsgpack.ts';

export type WireFormat = 'map' | 'array';
export const WIRE_FORMATS: readonly WireFormat[] = ['map', 'array'];
export const MEDIUM_GPU = 'GPU';
/** The OffloadingConnector's host tier (`CPULoadStoreSpec.medium()`, vllm/v1/kv_offload/mediums.py). */
export const MEDIUM_CPU = 'CPU';
/** The one KV cache group of a model with a single attention kind (vLLM's group 0). */
export const FULL_ATTENTION = 'full_attention';
/** Sequence frame that ends a replay answer: -1 as a signed 64-bit big-endian integer. */
export const END_SEQ_FRAME: Buffer = Buffer.alloc(8, 0xff);

export class WireError extends Error {
  readonly code = 'ERR_WIRE_DECODE';
}

// ---------------------------------------------------------------------------------------------
// Encoder

export interface EncodeBatchOptions {
  /** Wall-clock time of the batch in seconds since the epoch (vLLM's `time.time()`). */
  tsS: number;
  dpRank?: number;
  format?: WireFormat;
  /**
   * vLLM's integer id of a LoRA adapter (`lora_id`, which vLLM still sends beside `lora_name`);
   * absent or null: `lora_id` is None.
   */
  loraIdOf?: (loraName: string) => number | null;
}

/** One msgpack payload `[ts, [events...], dp_rank]` for kvroute events, hashes widened. */
export function encodeEventBatch(events: readonly KvEvent[], opts: EncodeBatchOptions): Buffer {
  const w = new MsgpackWriter();
  const asMap = (opts.format ?? 'map') === 'map';
  w.array(3).float64(opts.tsS).array(events.length);
  for (const event of events) {
    if (event.type === 'BlockStored') writeStored(w, event, asMap, opts.loraIdOf);
    else if (event.type === 'BlockRemoved') {
      // The connector's removals carry no group_idx (its default, None, is omitted).
      const cpu = event.medium === 'CPU';
      if (asMap)
        w.map(cpu ? 3 : 4)
          .str('type')
          .str('BlockRemoved')
          .str('block_hashes');
      else w.array(3).str('BlockRemoved');
      writeHashes(w, event.blockKeys);
      if (asMap) w.str('medium');
      w.str(cpu ? MEDIUM_CPU : MEDIUM_GPU);
      if (asMap && !cpu) w.str('group_idx').int(0);
    } else {
      if (asMap) w.map(1).str('type').str('AllBlocksCleared');
      else w.array(1).str('AllBlocksCleared');
    }
  }
  w.int(opts.dpRank ?? 0);
  return w.take();
}

function writeHashes(w: MsgpackWriter, keys: readonly BlockKey[]): void {
  w.array(keys.length);
  for (const key of keys) w.u64(toWireHash(key));
}

/** vLLM's per-block extra keys: LoRA name on every block, cache_salt on the chain's first. */
function extraKeysOf(event: Extract<KvEvent, { type: 'BlockStored' }>): (string[] | null)[] {
  return event.blockKeys.map((_, b) => {
    const keys: string[] = [];
    if (event.loraName) keys.push(event.loraName);
    if (event.cacheSalt && b === 0 && event.parentKey === null) keys.push(event.cacheSalt);
    return keys.length > 0 ? keys : null;
  });
}

/**
 * One store, in vLLM's field order. A CPU-tier store is as vLLM's
 * OffloadingConnectorScheduler.take_events builds it: the hashes, no parent, no token ids,
 * lora_id and lora_name None, medium "CPU"; every defaulted field after lora_name omitted
 * (extra_keys, group_idx, kv_cache_spec_kind: None), in both forms.
 */
function writeStored(
  w: MsgpackWriter,
  event: Extract<KvEvent, { type: 'BlockStored' }>,
  asMap: boolean,
  loraIdOf: EncodeBatchOptions['loraIdOf'],
): void {
  const cpu = event.medium === 'CPU';
  if (asMap) w.map(cpu ? 8 : 11).str('type');
  else w.array(cpu ? 8 : 9);
  w.str('BlockStored');
  if (asMap) w.str('block_hashes');
  writeHashes(w, event.blockKeys);
  if (asMap) w.str('parent_block_hash');
  if (cpu || event.parentKey === null) w.nil();
  else w.u64(toWireHash(event.parentKey));
  if (asMap) w.str('token_ids');
  const tokenIds = cpu ? [] : event.tokenIds;
  w.array(tokenIds.length);
  for (const t of tokenIds) w.int(t);
  if (asMap) w.str('block_size');
  w.int(event.blockSize);
  if (asMap) w.str('lora_id');
  const loraName = cpu ? null : event.loraName;
  const loraId = loraName ? (loraIdOf?.(loraName) ?? null) : null;
  if (loraId === null) w.nil();
  else w.int(loraId);
  if (asMap) w.str('medium');
  w.str(cpu ? MEDIUM_CPU : MEDIUM_GPU);
  if (asMap) w.str('lora_name');
  if (loraName) w.str(loraName);
  else w.nil();
  if (cpu) return;
  if (asMap) w.str('extra_keys');
  w.value(extraKeysOf(event));
  if (asMap) w.str('group_idx').int(0).str('kv_cache_spec_kind').str(FULL_ATTENTION);
}

/** The 8-byte big-endian sequence frame. */
export function encodeSeq(seq: bigint | number): Buffer {
  const out = Buffer.allocUnsafe(8);
  out.writeBigUInt64BE(BigInt(seq));
  return out;
}

export function decodeSeq(frame: Uint8Array): bigint {
  if (frame.length !== 8) throw new WireError(`sequence frame has ${frame.length} bytes, not 8`);
  return Buffer.from(frame.buffer, frame.byteOffset, 8).readBigUInt64BE();
}

/** How a replay ROUTER frames its answers (see the file comment). */
export type ReplayForm = 'topic' | 'no-topic';
export const REPLAY_FORMS: readonly ReplayForm[] = ['topic', 'no-topic'];

/** The frames a replay ROUTER sends for one buffered batch (identity first, for the ROUTER). */
export function replayBatchFrames(
  form: ReplayForm,
  topic: Buffer,
  seq: bigint,
  payload: Buffer,
): Buffer[] {
  const empty = Buffer.alloc(0);
  return form === 'topic'
    ? [empty, topic, encodeSeq(seq), payload]
    : [empty, encodeSeq(seq), payload];
}

/** The end marker of a replay answer. */
export function replayEndFrames(form: ReplayForm): Buffer[] {
  const empty = Buffer.alloc(0);
  return form === 'topic' ? [empty, empty, END_SEQ_FRAME, empty] : [empty, END_SEQ_FRAME, empty];
}

export type ReplayReply =
  | { kind: 'batch'; form: ReplayForm; topic: Buffer | null; seq: bigint; payload: Buffer }
  | { kind: 'end'; form: ReplayForm };

/**
 * One message a DEALER received from a replay ROUTER, in either form, told apart by frame count:
 * `[empty, topic, seq, payload]` (vLLM >= 0.26) or `[empty, seq, payload]` (older vLLM, SGLang).
 * Throws WireError for anything else.
 */
export function readReplayReply(frames: readonly Uint8Array[]): ReplayReply {
  if (frames[0]?.length !== 0) throw new WireError('replay reply without the empty delimiter');
  let form: ReplayForm;
  let topic: Buffer | null = null;
  let seqFrame: Uint8Array;
  let payload: Uint8Array;
  if (frames.length === 4) {
    form = 'topic';
    topic = Buffer.from(frames[1]!);
    seqFrame = frames[2]!;
    payload = frames[3]!;
  } else if (frames.length === 3) {
    form = 'no-topic';
    seqFrame = frames[1]!;
    payload = frames[2]!;
  } else throw new WireError(`replay reply has ${frames.length} frames, not 3 or 4`);
  if (seqFrame.length === 8 && seqFrame.every((b) => b === 0xff)) return { kind: 'end', form };
  return {
    kind: 'batch',
    form,
    topic,
    seq: decodeSeq(seqFrame),
    payload: Buffer.from(payload.buffer, payload.byteOffset, payload.length),
  };
}

/** The kvroute block key behind a wire hash this engine published (inverse of toWireHash). */
export function wireHashToBlockKey(hash: bigint): BlockKey {
  return Number(hash >> 11n);
}

// ---------------------------------------------------------------------------------------------
// Decoder

export interface WireBlockStored {
  type: 'BlockStored';
  blockHashes: bigint[];
  parentBlockHash: bigint | null;
  /** Token ids of all the blocks, concatenated. */
  tokenIds: number[];
  blockSize: number;
  loraId: number | null;
  medium: string | null;
  loraName: string | null;
  /** Per-block extra keys as sent, or null when absent. */
  extraKeys: (unknown[] | null)[] | null;
  /** cache_salt recovered from the first block's extra keys when the chain starts here. */
  cacheSalt: string | null;
  /** KV cache group (hybrid models have several), null when not sent. */
  groupIdx: number | null;
  /** The group's attention kind, e.g. "full_attention", "sliding_window"; null when not sent. */
  kvCacheSpecKind: string | null;
}

export interface WireBlockRemoved {
  type: 'BlockRemoved';
  blockHashes: bigint[];
  medium: string | null;
  groupIdx: number | null;
}

export interface WireAllBlocksCleared {
  type: 'AllBlocksCleared';
}

export type WireEvent = WireBlockStored | WireBlockRemoved | WireAllBlocksCleared;

export interface WireEventBatch {
  /** Producer's timestamp, seconds since the epoch. */
  tsS: number;
  events: WireEvent[];
  dpRank: number | null;
  /** Events with a tag this decoder does not know (skipped, not fatal). */
  skippedEvents: number;
  /**
   * BlockStored events refused as malformed (nothing of them indexed): a block size that is not
   * an integer >= 1, token ids that are not integers >= 0, or a token count other than
   * block_size x block hashes (vLLM and SGLang always send whole blocks).
   */
  malformedEvents: number;
  /** Why the first malformed event was refused (null when none was). */
  malformedReason: string | null;
}

const read = fieldReaders(WireError);
const unpackr = new Unpackr({ mapsAsObjects: true, useRecords: false, int64AsType: 'bigint' });

/** Decodes one payload frame; throws WireError (code ERR_WIRE_DECODE) on malformed input. */
export function decodeEventBatch(payload: Uint8Array): WireEventBatch {
  let raw: unknown;
  try {
    raw = unpackr.unpack(payload);
  } catch (err) {
    throw new WireError(`payload is not msgpack: ${(err as Error).message}`);
  }
  let ts: unknown;
  let events: unknown;
  let dpRank: unknown;
  if (Array.isArray(raw)) [ts, events, dpRank] = raw;
  else if (isRecord(raw)) {
    ts = raw.ts;
    events = raw.events;
    dpRank = raw.data_parallel_rank ?? raw.dp_rank;
  } else throw new WireError('payload is neither an array nor a map');
  if (!Array.isArray(events)) throw new WireError('batch has no events list');
  return decodeBatchEvents(
    ts === undefined || ts === null ? 0 : read.number(ts, 'ts'),
    read.optNumber(dpRank, 'dp_rank'),
    events,
    decodeEvent,
    MalformedEvent,
  );
}

/**
 * Each event's fields by name from the array form (`raw[0]` the tag, the fields in order after
 * it; a field past the array's end is absent). One object literal per tag, so that every event
 * of a tag has the same shape: filled name by name in a loop, the decode took 1.06x as long
 * (`bench/eventDecode.ts`). Looked up as an own property: a tag such as "constructor" is no
 * event of ours, and is skipped like any other unknown tag.
 */
const POSITIONAL: Record<WireEvent['type'], (raw: unknown[]) => Record<string, unknown>> = {
  BlockStored: (raw) => ({
    block_hashes: raw[1],
    parent_block_hash: raw[2],
    token_ids: raw[3],
    block_size: raw[4],
    lora_id: raw[5],
    medium: raw[6],
    lora_name: raw[7],
    extra_keys: raw[8],
    group_idx: raw[9],
    kv_cache_spec_kind: raw[10],
  }),
  BlockRemoved: (raw) => ({ block_hashes: raw[1], medium: raw[2], group_idx: raw[3] }),
  AllBlocksCleared: () => ({}),
};

function decodeEvent(raw: unknown): WireEvent | null {
  let tag: unknown;
  let fields: Record<string, unknown>;
  if (Array.isArray(raw)) {
    tag = raw[0];
    const named = Object.hasOwn(POSITIONAL, tag as string)
      ? POSITIONAL[tag as WireEvent['type']]
      : undefined;
    if (!named) return null;
    fields = named(raw);
  } else if (isRecord(raw)) {
    tag = raw.type;
    fields = raw;
  } else throw new WireError('event is neither an array nor a map');
  switch (tag) {
    case 'BlockStored':
      return decodeStored(fields);
    case 'BlockRemoved':
      return {
        type: 'BlockRemoved',
        blockHashes: read.hashes(fields.block_hashes, toHash),
        medium: optString(fields.medium),
        groupIdx: read.optNumber(fields.group_idx, 'group_idx'),
      };
    case 'AllBlocksCleared':
      return { type: 'AllBlocksCleared' };
    default:
      return null;
  }
}

/** One event refused on its values (the batch's other events still count). */
class MalformedEvent extends WireError {}

function decodeStored(f: Record<string, unknown>): WireBlockStored {
  const blockHashes = read.hashes(f.block_hashes, toHash);
  if (!Array.isArray(f.token_ids)) throw new WireError('BlockStored without token_ids');
  // The usual event's ids are all plain non-negative integers: one pass checks and copies them.
  const packed = packedTokenIds(f.token_ids);
  const tokenIds = packed ?? numbersOf(f.token_ids);
  const parentBlockHash =
    f.parent_block_hash === undefined || f.parent_block_hash === null
      ? null
      : toHash(f.parent_block_hash);
  const blockSize =
    f.block_size === undefined || f.block_size === null
      ? blockHashes.length > 0
        ? tokenIds.length / blockHashes.length
        : 0
      : read.number(f.block_size, 'block_size');
  const medium = optString(f.medium);
  // An offloading connector's store names blocks by hash alone (token_ids [], block_size the
  // offloaded block's, or 0 in some versions): its consumer knows them from their GPU store.
  const tierStore = medium !== null && medium !== MEDIUM_GPU && tokenIds.length === 0;
  if (!tierStore) checkStored(blockHashes.length, tokenIds, blockSize, packed !== null);
  const loraName = optString(f.lora_name);
  const extraKeys = Array.isArray(f.extra_keys)
    ? f.extra_keys.map((k) => (Array.isArray(k) ? k : null))
    : null;
  return {
    type: 'BlockStored',
    blockHashes,
    parentBlockHash,
    tokenIds,
    blockSize,
    loraId: read.optNumber(f.lora_id, 'lora_id'),
    medium,
    loraName,
    extraKeys,
    // Newer SGLang sends the salt as a field of its own; vLLM inside the first block's extra keys.
    cacheSalt:
      parentBlockHash === null
        ? (optString(f.cache_salt) ?? saltOf(extraKeys?.[0] ?? null, loraName))
        : null,
    groupIdx: read.optNumber(f.group_idx, 'group_idx'),
    kvCacheSpecKind: optString(f.kv_cache_spec_kind),
  };
}

/**
 * A stored event indexes whole blocks of real token ids, or nothing. `idsChecked`: every id is
 * known to be an integer >= 0 already.
 */
function checkStored(
  blocks: number,
  tokenIds: readonly number[],
  blockSize: number,
  idsChecked: boolean,
): void {
  if (!(Number.isSafeInteger(blockSize) && blockSize >= 1)) {
    throw new MalformedEvent(`BlockStored with block_size ${blockSize} (an integer >= 1)`);
  }
  const bad = idsChecked ? -1 : tokenIds.findIndex((t) => !(Number.isSafeInteger(t) && t >= 0));
  if (bad >= 0) {
    throw new MalformedEvent(`BlockStored with token id ${tokenIds[bad]} (integers >= 0)`);
  }
  if (tokenIds.length !== blocks * blockSize) {
    throw new MalformedEvent(
      `BlockStored with ${tokenIds.length} token ids for ${blocks} blocks of ${blockSize}`,
    );
  }
}

/**
 * The ids in a packed array, or null unless every one is a number that is an integer >= 0 (a
 * loop: it runs once per token). Packed, not the decoder's array: msgpackr makes each array at
 * its length, with holes, and the block-key hash then meets two kinds of token array (a
 * tokenizer's are packed), which took bench:router's keys from 7.4 to 10 µs a pick.
 */
function packedTokenIds(ids: unknown[]): number[] | null {
  const out: number[] = [];
  for (let i = 0; i < ids.length; i++) {
    const t = ids[i];
    if (!(Number.isSafeInteger(t) && (t as number) >= 0)) return null;
    out.push(t as number);
  }
  return out;
}

/** Token ids as numbers, BigInts converted; any other type refuses the event. */
function numbersOf(ids: unknown[]): number[] {
  return ids.map((id) => {
    if (typeof id !== 'number' && typeof id !== 'bigint') {
      throw new MalformedEvent(`BlockStored with a token id of type ${typeof id}`);
    }
    return Number(id);
  });
}

/**
 * vLLM's first-block extra keys are (LoRA name?, multimodal keys..., cache_salt?, prompt-embeds
 * digests...): `generate_block_hash_extra_keys` in vllm/v1/core/kv_cache_utils.py. Multimodal
 * keys are `(identifier, offset)` tuples and prompt-embeds digests are bytes, so the salt is the
 * last plain string after the LoRA name, whatever it looks like (a 64-hex-digit salt is a salt).
 * Typed extra keys (newer vLLM) are tagged maps: `{"type": "cache_salt", "salt": ...}`.
 */
function saltOf(keys: unknown[] | null, loraName: string | null): string | null {
  if (!keys) return null;
  let salt: string | null = null;
  keys.forEach((k, i) => {
    if (typeof k === 'string') {
      if (!(i === 0 && k === loraName)) salt = k;
    } else if (isRecord(k) && k.type === 'cache_salt' && typeof k.salt === 'string') {
      salt = k.salt;
    }
  });
  return salt;
}

/** Ints, BigInts (signed producers are read as two's complement) or raw bytes. */
function toHash(v: unknown): bigint {
  if (typeof v === 'bigint') return BigInt.asUintN(64, v);
  if (typeof v === 'number' && Number.isInteger(v)) return BigInt.asUintN(64, BigInt(v));
  if (v instanceof Uint8Array) {
    let h = 0n;
    for (const byte of v.subarray(Math.max(0, v.length - 8))) h = (h << 8n) | BigInt(byte);
    return h;
  }
  throw new WireError(`block hash of type ${typeof v}`);
}
