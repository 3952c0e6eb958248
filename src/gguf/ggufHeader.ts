/**
 * The bytes before a GGUF file's tensor data: header, key-values, tensor infos, and the padding
 * to the alignment. Tensors are laid out in the order given, each at an aligned offset; the data
 * that follows is the caller's to stream (`tensorLayout` says where each tensor goes).
 */
import {
  alignUp,
  GGUF_MAGIC,
  GGUF_VERSION,
  type GgufKv,
  type GgufTensorInfo,
  GgufType,
  type GgufValue,
  tensorBytes,
} from './ggufFormat.ts';

/** A growable little-endian byte buffer. */
class ByteSink {
  #buf = Buffer.alloc(1 << 16);
  #len = 0;

  #room(n: number): void {
    if (this.#len + n <= this.#buf.length) return;
    const next = Buffer.alloc(Math.max(this.#buf.length * 2, this.#len + n));
    this.#buf.copy(next, 0, 0, this.#len);
    this.#buf = next;
  }
  /** Makes room for `width` bytes, then `write` puts them at the end (it returns the new end). */
  #put(width: number, write: (buf: Buffer, at: number) => number): void {
    this.#room(width);
    this.#len = write(this.#buf, this.#len);
  }
  u32(n: number): void {
    this.#put(4, (buf, at) => buf.writeUInt32LE(n, at));
  }
  i32(n: number): void {
    this.#put(4, (buf, at) => buf.writeInt32LE(n, at));
  }
  u64(n: number): void {
    this.#put(8, (buf, at) => buf.writeBigUInt64LE(BigInt(n), at));
  }
  f32(n: number): void {
    this.#put(4, (buf, at) => buf.writeFloatLE(n, at));
  }
  u8(n: number): void {
    this.#put(1, (buf, at) => buf.writeUInt8(n, at));
  }
  string(s: string): void {
    const bytes = Buffer.byteLength(s, 'utf8');
    this.u64(bytes);
    this.#room(bytes);
    this.#len += this.#buf.write(s, this.#len, 'utf8');
  }
  zeros(n: number): void {
    this.#room(n);
    this.#buf.fill(0, this.#len, this.#len + n);
    this.#len += n;
  }
  get length(): number {
    return this.#len;
  }
  bytes(): Buffer {
    return this.#buf.subarray(0, this.#len);
  }
}

/** A scalar value's GGUF type tag (gguf-py/gguf/constants.py `GGUFValueType`). */
const SCALAR_TAG = {
  u32: GgufType.UINT32,
  i32: GgufType.INT32,
  f32: GgufType.FLOAT32,
  bool: GgufType.BOOL,
  string: GgufType.STRING,
} as const;

/** The value alone, no tag: an array's elements are written so. */
function writeScalar(
  sink: ByteSink,
  type: keyof typeof SCALAR_TAG,
  value: number | boolean | string,
): void {
  if (type === 'string') sink.string(value as string);
  else if (type === 'bool') sink.u8(value ? 1 : 0);
  else sink[type](value as number);
}

function writeValue(sink: ByteSink, value: GgufValue): void {
  if (value.type === 'strings' || value.type === 'i32s') {
    const element = value.type === 'strings' ? 'string' : 'i32';
    sink.u32(GgufType.ARRAY);
    sink.u32(SCALAR_TAG[element]);
    sink.u64(value.value.length);
    for (let i = 0; i < value.value.length; i++) writeScalar(sink, element, value.value[i]!);
    return;
  }
  sink.u32(SCALAR_TAG[value.type]);
  writeScalar(sink, value.type, value.value);
}

export interface TensorPlacement {
  info: GgufTensorInfo;
  /** From the start of the data section. */
  offsetBytes: number;
  sizeBytes: number;
}

/** Each tensor's aligned offset in the data section, in the order given. */
export function tensorLayout(
  tensors: readonly GgufTensorInfo[],
  alignment: number,
): { placements: TensorPlacement[]; dataBytes: number } {
  let offset = 0;
  const placements = tensors.map((info) => {
    const sizeBytes = tensorBytes(info);
    const placement = { info, offsetBytes: offset, sizeBytes };
    offset = alignUp(offset + sizeBytes, alignment);
    return placement;
  });
  return { placements, dataBytes: offset };
}

/**
 * Header, key-values and tensor infos, padded with zeros to `alignment` (which must also be the
 * file's `general.alignment`, or 32 when the key-values leave it out).
 */
export function encodeGgufHeader(
  kvs: readonly GgufKv[],
  placements: readonly TensorPlacement[],
  alignment: number,
): Buffer {
  const sink = new ByteSink();
  for (const c of GGUF_MAGIC) sink.u8(c.charCodeAt(0));
  sink.u32(GGUF_VERSION);
  sink.u64(placements.length);
  sink.u64(kvs.length);
  for (const [key, value] of kvs) {
    sink.string(key);
    writeValue(sink, value);
  }
  for (const { info, offsetBytes } of placements) {
    sink.string(info.name);
    sink.u32(info.dims.length);
    for (const d of info.dims) sink.u64(d);
    sink.u32(info.type);
    sink.u64(offsetBytes);
  }
  sink.zeros(alignUp(sink.length, alignment) - sink.length);
  return Buffer.from(sink.bytes());
}
