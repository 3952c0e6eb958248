/**
 * Seeded tensor data, streamed in chunks: each tensor draws from its own PRNG stream derived from
 * the seed and its name, so its bytes depend only on the seed, its name and its size. A normal
 * tensor takes two values per 32-bit draw, each 16 bits indexing `normalTable.ts`'s quantiles.
 */
import { Rng } from '../util/rng.ts';
import { GgmlType } from './ggufFormat.ts';
import { NORMAL_LEVELS, normalF16Table, normalQuantiles } from './normalTable.ts';
import type { TinyTensor } from './tinyLlama.ts';

/** Elements per chunk: 1 Mi values, 2-4 MiB of bytes. */
const CHUNK_ELEMENTS = 1 << 20;

/** The tensor's bytes, chunk by chunk; each chunk is reused once the next is asked for. */
export function* tensorChunks(tensor: TinyTensor, seed: number): Generator<Uint8Array> {
  const count = tensor.dims.reduce((n, d) => n * d, 1);
  const rng = Rng.derive(seed, tensor.name);
  const f16 = tensor.type === GgmlType.F16;
  const out = f16
    ? new Uint16Array(Math.min(count, CHUNK_ELEMENTS))
    : new Float32Array(Math.min(count, CHUNK_ELEMENTS));
  const init = tensor.init;
  const table: ArrayLike<number> =
    init.kind === 'ones' ? [] : f16 ? normalF16Table(init.std) : scaledQuantiles(init.std);
  const one = f16 ? 0x3c00 : 1;
  for (let done = 0; done < count; done += out.length) {
    const n = Math.min(out.length, count - done);
    const chunk = out.subarray(0, n);
    if (init.kind === 'ones') chunk.fill(one);
    else {
      for (let i = 0; i < n; i += 2) {
        const r = rng.nextU32();
        chunk[i] = table[r & 0xffff]!;
        if (i + 1 < n) chunk[i + 1] = table[r >>> 16]!;
      }
    }
    yield new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  }
}

function scaledQuantiles(std: number): Float32Array {
  const z = normalQuantiles();
  const out = new Float32Array(NORMAL_LEVELS);
  for (let k = 0; k < NORMAL_LEVELS; k++) out[k] = z[k]! * std;
  return out;
}
