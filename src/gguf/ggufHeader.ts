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
  u32(n: number): void {
    this.#room(4);
    this.#len = this.#buf.writeUInt32LE(n, this.#len);
  }
  i32(n: number): void {
    this.#room(4);
    this.#len = this.#buf.writeInt32LE(n, this.#len);
  }
  u64(n: number): void {
    this.#room(8);
    this.#len = this.#buf.writeBigUInt64LE(BigInt(n), this.#len);
  }
  f32(n: number): void {
    this.#room(4);
    this.#len = this.#buf.writeFloatLE(n, this.#len);
  }
  u8(n: number): void {
    this.#room(1);
    this.#len = this.#buf.writeUInt8(n, this.#len);
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

function writeValue(sink: ByteSink, value: GgufValue): void {
  switch (value.type) {
    case 'u32':
      sink.u32(GgufType.UINT32);
      sink.u32(value.value);
      return;
    case 'i32':
      sink.u32(GgufType.INT32);
      sink.i32(value.value);
      return;
    case 'f32':
      sink.u32(GgufType.FLOAT32);
      sink.f32(value.value);
      return;
    case 'bool':
      sink.u32(GgufType.BOOL);
      sink.u8(value.value ? 1 : 0);
      return;
    case 'string':
      sink.u32(GgufType.STRING);
      sink.string(value.value);
      return;
    case 'strings':
      sink.u32(GgufType.ARRAY);
      sink.u32(GgufType.STRING);
      sink.u64(value.value.length);
      for (const s of value.value) sink.string(s);
      return;
    case 'i32s':
      sink.u32(GgufType.ARRAY);
      sink.u32(GgufType.INT32);
      sink.u64(value.value.length);
      for (let i = 0; i < value.value.length; i++) sink.i32(value.value[i]!);
      return;
  }
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
