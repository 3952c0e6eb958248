/**
 * An independent, minimal MessagePack encoder that follows Python msgspec's rules, and msgspec
 * struct definitions transcribed from vLLM's `vllm/distributed/kv_events.py`. Tests build the
 * bytes a vLLM engine sends from these definitions, not from kvroute's own encoder
 * (src/kv/wireMsgpack.ts), so a shared misreading cannot hide.
 *
 * msgspec's encoding, as the tests rely on it: ints in the smallest form (unsigned forms for
 * non-negative values, uint64 up to 2^64-1), every float as float64, str as fixstr/str8/str16,
 * bytes as bin, lists and tuples as arrays, dicts as maps in insertion order. A Struct with
 * `array_like=True` is an array of its fields in declaration order, the tag first when
 * `tag=True`; otherwise a map with the tag under "type" first. `omit_defaults=True` drops fields
 * equal to their default: any such field in a map, only the trailing ones in an array.
 */

import { Unpackr } from 'msgpackr';

/** A Python float (JS numbers are otherwise encoded as ints). */
export class PyFloat {
  constructor(readonly value: number) {}
}

export type Py =
  | null
  | boolean
  | number
  | bigint
  | string
  | PyFloat
  | Uint8Array
  | readonly Py[]
  | PyStruct
  | PyDict;

/** A Python dict (a map with string keys, in insertion order). */
export class PyDict {
  constructor(readonly entries: readonly (readonly [string, Py])[]) {}
}

const NO_DEFAULT = Symbol('no default');

export interface FieldDef {
  name: string;
  default: Py | typeof NO_DEFAULT;
}

export interface StructDef {
  name: string;
  fields: readonly FieldDef[];
  arrayLike: boolean;
  tag: boolean;
  omitDefaults: boolean;
}

/** A struct instance: its definition and the values given (the rest take their defaults). */
export class PyStruct {
  constructor(
    readonly def: StructDef,
    readonly values: Readonly<Record<string, Py>>,
  ) {}
}

/** `name: T` (no default) or `name: T = default`. */
export const field = (name: string, ...dflt: [Py] | []): FieldDef => ({
  name,
  default: dflt.length === 0 ? NO_DEFAULT : dflt[0]!,
});

export function struct(
  name: string,
  opts: { arrayLike?: boolean; tag?: boolean; omitDefaults?: boolean },
  fields: readonly FieldDef[],
): StructDef {
  return {
    name,
    fields,
    arrayLike: opts.arrayLike ?? false,
    tag: opts.tag ?? false,
    omitDefaults: opts.omitDefaults ?? false,
  };
}

export const make = (def: StructDef, values: Record<string, Py> = {}): PyStruct =>
  new PyStruct(def, values);

function equal(a: Py, b: Py): boolean {
  if (a instanceof PyFloat && b instanceof PyFloat) return a.value === b.value;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((x, i) => equal(x, b[i]!));
  }
  return a === b;
}

export function encode(value: Py): Buffer {
  const out: number[] = [];
  write(out, value);
  return Buffer.from(out);
}

/** A marker byte, then `n` big-endian in `bytes` bytes. */
function be(out: number[], marker: number, n: bigint, bytes: number): void {
  out.push(marker);
  for (let i = bytes - 1; i >= 0; i--) out.push(Number((n >> BigInt(8 * i)) & 0xffn));
}

function writeInt(out: number[], v: bigint): void {
  if (v >= 0n) {
    if (v < 0x80n) out.push(Number(v));
    else if (v < 0x100n) be(out, 0xcc, v, 1);
    else if (v < 0x10000n) be(out, 0xcd, v, 2);
    else if (v < 0x100000000n) be(out, 0xce, v, 4);
    else be(out, 0xcf, v, 8);
  } else if (v >= -32n) out.push(Number(BigInt.asUintN(8, v)));
  else if (v >= -0x80n) be(out, 0xd0, BigInt.asUintN(8, v), 1);
  else if (v >= -0x8000n) be(out, 0xd1, BigInt.asUintN(16, v), 2);
  else if (v >= -0x80000000n) be(out, 0xd2, BigInt.asUintN(32, v), 4);
  else be(out, 0xd3, BigInt.asUintN(64, v), 8);
}

function header(out: number[], n: number, fix: number, fixMax: number, h16: number): void {
  if (n < fixMax) out.push(fix | n);
  else be(out, h16, BigInt(n), 2);
}

function write(out: number[], v: Py): void {
  if (v === null) out.push(0xc0);
  else if (v === true) out.push(0xc3);
  else if (v === false) out.push(0xc2);
  else if (typeof v === 'number') {
    if (!Number.isInteger(v)) throw new TypeError(`wrap floats in PyFloat: ${v}`);
    writeInt(out, BigInt(v));
  } else if (typeof v === 'bigint') writeInt(out, v);
  else if (v instanceof PyFloat) {
    const b = Buffer.alloc(8);
    b.writeDoubleBE(v.value);
    out.push(0xcb, ...b);
  } else if (typeof v === 'string') {
    const bytes = Buffer.from(v, 'utf8');
    if (bytes.length < 32) out.push(0xa0 | bytes.length);
    else if (bytes.length < 0x100) be(out, 0xd9, BigInt(bytes.length), 1);
    else be(out, 0xda, BigInt(bytes.length), 2);
    out.push(...bytes);
  } else if (v instanceof Uint8Array) {
    be(out, 0xc4, BigInt(v.length), 1);
    out.push(...v);
  } else if (Array.isArray(v)) {
    header(out, v.length, 0x90, 16, 0xdc);
    for (const item of v) write(out, item);
  } else if (v instanceof PyDict) {
    header(out, v.entries.length, 0x80, 16, 0xde);
    for (const [k, item] of v.entries) {
      write(out, k);
      write(out, item);
    }
  } else if (v instanceof PyStruct) writeStruct(out, v);
  else throw new TypeError('unsupported value');
}

function writeStruct(out: number[], s: PyStruct): void {
  const { def, values } = s;
  const present = def.fields.map((f) => {
    const given = Object.hasOwn(values, f.name);
    if (!given && f.default === NO_DEFAULT)
      throw new TypeError(`${def.name}.${f.name} is required`);
    const value = given ? values[f.name]! : (f.default as Py);
    const isDefault = f.default !== NO_DEFAULT && equal(value, f.default as Py);
    return { name: f.name, value, isDefault };
  });
  if (def.arrayLike) {
    let n = present.length;
    if (def.omitDefaults) while (n > 0 && present[n - 1]!.isDefault) n--;
    const items: Py[] = present.slice(0, n).map((p) => p.value);
    write(out, def.tag ? [def.name, ...items] : items);
    return;
  }
  const kept = present.filter((p) => !(def.omitDefaults && p.isDefault));
  const entries: [string, Py][] = kept.map((p) => [p.name, p.value]);
  write(out, new PyDict(def.tag ? [['type', def.name], ...entries] : entries));
}

// ---------------------------------------------------------------------------------------------
// vLLM's structs (vllm/distributed/kv_events.py)

/** `EventBatch` (`array_like=True, omit_defaults=True`) in every version since PR #18925. */
const eventBatch = () =>
  struct('KVEventBatch', { arrayLike: true, omitDefaults: true }, [
    field('ts'),
    field('events'),
    field('data_parallel_rank', null),
  ]);

/** The BlockStored fields every version has, in order (PR #16750, medium #19737, lora_name #27577). */
const storedHead = () =>
  [
    'block_hashes',
    'parent_block_hash',
    'token_ids',
    'block_size',
    'lora_id',
    'medium',
    'lora_name',
  ].map((name) => field(name));

/**
 * vLLM < 0.26, the last array_like events: PR #16750's structs (`array_like=True,
 * omit_defaults=True, gc=False, tag=True`) with the fields added before group_idx, in order
 * (medium #19737, lora_name #27577, extra_keys #33304 with default None).
 */
export const V025 = (() => {
  const event = { arrayLike: true, tag: true, omitDefaults: true };
  return {
    EventBatch: eventBatch(),
    BlockStored: struct('BlockStored', event, [...storedHead(), field('extra_keys', null)]),
    BlockRemoved: struct('BlockRemoved', event, [field('block_hashes'), field('medium')]),
    AllBlocksCleared: struct('AllBlocksCleared', event, []),
  };
})();

/**
 * vLLM >= 0.26 (PR #42892): events are tagged maps (`omit_defaults=True, gc=False, tag=True`, no
 * array_like); the batch stays array_like.
 */
export const V026 = (() => {
  const event = { tag: true, omitDefaults: true };
  return {
    EventBatch: eventBatch(),
    BlockStored: struct('BlockStored', event, [
      ...storedHead(),
      field('event_version', 1),
      field('extra_keys', null),
      field('group_idx', null),
      field('kv_cache_spec_kind', null),
      field('kv_cache_spec_sliding_window', null),
      field('locality', null),
      field('ownership', null),
    ]),
    BlockRemoved: struct('BlockRemoved', event, [
      field('block_hashes'),
      field('medium'),
      field('group_idx', null),
      field('locality', null),
      field('ownership', null),
    ]),
    AllBlocksCleared: struct('AllBlocksCleared', event, []),
    /** Typed extra keys (`msgspec.Struct, gc=False, frozen=True, tag=True`, tag "cache_salt"). */
    CacheSaltKey: struct('cache_salt', { tag: true }, [field('salt')]),
  };
})();

/** `ZmqEventPublisher.END_SEQ`: (-1).to_bytes(8, "big", signed=True). */
export const END_SEQ = Buffer.alloc(8, 0xff);

/** `seq.to_bytes(8, "big")`. */
export function seqBytes(seq: number | bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(seq));
  return b;
}

// ---------------------------------------------------------------------------------------------
// Reading: msgpack by msgpackr (not kvroute's decoder), the structure by the definitions above

/**
 * One struct read strictly by its definition, as msgspec would have written it: an array_like
 * struct is `[tag?, fields in declaration order]` with only trailing defaults left out; a map is
 * `{type: tag?, fields in declaration order}`, any default left out, and no key the definition
 * does not have. Throws on anything else (an unknown or misplaced field fails here). Returns
 * every field, defaults filled in.
 */
export function readStruct(def: StructDef, value: unknown): Record<string, unknown> {
  const required = def.fields.filter((f) => f.default === NO_DEFAULT).length;
  const out: Record<string, unknown> = {};
  if (def.arrayLike) {
    if (!Array.isArray(value)) throw new TypeError(`${def.name}: not an array`);
    const items = def.tag ? value.slice(1) : value;
    if (def.tag && value[0] !== def.name) throw new TypeError(`${def.name}: tag ${value[0]}`);
    if (items.length < required || items.length > def.fields.length) {
      throw new TypeError(`${def.name}: ${items.length} fields`);
    }
    def.fields.forEach((f, i) => {
      out[f.name] = i < items.length ? items[i] : f.default;
    });
    return out;
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`${def.name}: not a map`);
  }
  const keys = Object.keys(value);
  const entries = value as Record<string, unknown>;
  if (def.tag) {
    if (keys[0] !== 'type' || entries.type !== def.name) {
      throw new TypeError(`${def.name}: tag ${String(entries.type)}`);
    }
    keys.shift();
  }
  let at = 0;
  for (const key of keys) {
    const i = def.fields.findIndex((f) => f.name === key);
    if (i < 0) throw new TypeError(`${def.name}: unknown field ${key}`);
    if (i < at) throw new TypeError(`${def.name}: ${key} out of declaration order`);
    at = i + 1;
  }
  for (const f of def.fields) {
    if (Object.hasOwn(entries, f.name)) out[f.name] = entries[f.name];
    else if (f.default === NO_DEFAULT) throw new TypeError(`${def.name}: ${f.name} missing`);
    else out[f.name] = f.default;
  }
  return out;
}

const unpacker = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });

/** A batch payload read by msgpackr and `era`'s definitions: the batch and its tagged events. */
export function readBatch(
  era: typeof V025 | typeof V026,
  payload: Uint8Array,
): { ts: number; dpRank: unknown; events: { type: string; fields: Record<string, unknown> }[] } {
  const batch = readStruct(era.EventBatch, unpacker.unpack(payload));
  if (!Array.isArray(batch.events)) throw new TypeError('events: not an array');
  const events = batch.events.map((e: unknown) => {
    const type = Array.isArray(e) ? e[0] : (e as { type?: unknown } | null)?.type;
    const def = {
      BlockStored: era.BlockStored,
      BlockRemoved: era.BlockRemoved,
      AllBlocksCleared: era.AllBlocksCleared,
    }[String(type) as 'BlockStored'];
    if (!def) throw new TypeError(`unknown event ${String(type)}`);
    return { type: def.name, fields: readStruct(def, e) };
  });
  return { ts: batch.ts as number, dpRank: batch.data_parallel_rank, events };
}
