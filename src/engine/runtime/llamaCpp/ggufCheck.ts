/**
 * A bounded walk over a GGUF file's header (magic, version, key-value pairs, tensor infos)
 * before llama.cpp sees it: node-llama-cpp's own header reader waits forever on a file cut off
 * inside its header, so a truncated or foreign file is refused here, with the reason, instead.
 * Layout (ggml's gguf.md): "GGUF", u32 version, u64 tensor count, u64 key-value count, then the
 * pairs (string key, u32 type, value), then per tensor a string name, u32 dims, u64 per dim,
 * u32 type, u64 offset. Strings are a u64 length and bytes; arrays a u32 type, u64 count, items.
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';

/** The header is read whole into memory up to this size (Llama 3's vocabulary takes ~8 MB). */
const MAX_HEADER_BYTES = 256 * 1024 * 1024;
/** Fixed sizes of GGUF's scalar types, by type id (8: string, 9: array). */
const SCALAR_BYTES: Record<number, number> = {
  0: 1,
  1: 1,
  2: 2,
  3: 2,
  4: 4,
  5: 4,
  6: 4,
  7: 1,
  10: 8,
  11: 8,
  12: 8,
};

/** Why the file is not a whole GGUF header, or null when it is. */
export function ggufHeaderProblem(path: string): string | null {
  const size = statSync(path).size;
  const length = Math.min(size, MAX_HEADER_BYTES);
  const buf = Buffer.alloc(length);
  const fd = openSync(path, 'r');
  try {
    readSync(fd, buf, 0, length, 0);
  } finally {
    closeSync(fd);
  }
  let at = 0;
  const need = (n: number) => {
    if (at + n > length)
      throw new RangeError(size > length ? 'header too large' : 'the file ends inside its header');
  };
  const u32 = () => (need(4), (at += 4), buf.readUInt32LE(at - 4));
  const u64 = () => {
    need(8);
    const v = buf.readBigUInt64LE(at);
    at += 8;
    if (v > BigInt(length)) throw new RangeError('the file ends inside its header');
    return Number(v);
  };
  const skipString = () => {
    const n = u64();
    need(n);
    at += n;
  };
  const skipValue = (type: number): void => {
    if (type === 8) return skipString();
    if (type === 9) {
      const item = u32();
      const count = u64();
      if (item === 8 || item === 9) for (let i = 0; i < count; i++) skipValue(item);
      else {
        const bytes = SCALAR_BYTES[item];
        if (bytes === undefined) throw new RangeError(`unknown value type ${item}`);
        need(bytes * count);
        at += bytes * count;
      }
      return;
    }
    const bytes = SCALAR_BYTES[type];
    if (bytes === undefined) throw new RangeError(`unknown value type ${type}`);
    need(bytes);
    at += bytes;
  };
  try {
    need(4);
    if (buf.toString('latin1', 0, 4) !== 'GGUF') return 'not a GGUF file (no GGUF magic)';
    at = 4;
    const version = u32();
    if (version < 2 || version > 3) return `GGUF version ${version} (llama.cpp reads 2 and 3)`;
    const tensors = u64();
    const kvs = u64();
    for (let i = 0; i < kvs; i++) {
      skipString();
      skipValue(u32());
    }
    for (let i = 0; i < tensors; i++) {
      skipString();
      const dims = u32();
      need(8 * dims + 12);
      at += 8 * dims + 12;
    }
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}
