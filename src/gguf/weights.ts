/**
 * Seeded tensor data, streamed in chunks: each tensor draws from its own PRNG stream derived from
 * the seed and its name, so the bytes depend only on the seed, the tensor's name and its size.
 */
import { Rng } from '../util/rng.ts';
import { GgmlType } from './ggufFormat.ts';
import { toF16 } from './f16.ts';
import type { TinyTensor } from './tinyLlama.ts';

/** Elements per chunk: 1 Mi values, 2-4 MiB of bytes. */
const CHUNK_ELEMENTS = 1 << 20;

/** The tensor's bytes, chunk by chunk (each chunk a fresh view the caller may write out). */
export function* tensorChunks(tensor: TinyTensor, seed: number): Generator<Uint8Array> {
  const count = tensor.dims.reduce((n, d) => n * d, 1);
  const rng = Rng.derive(seed, tensor.name);
  const values = new Float32Array(Math.min(count, CHUNK_ELEMENTS));
  const halves = tensor.type === GgmlType.F16 ? new Uint16Array(values.length) : null;
  const gaussian = new Gaussian(rng);
  for (let done = 0; done < count; done += values.length) {
    const n = Math.min(values.length, count - done);
    const chunk = values.subarray(0, n);
    if (tensor.init.kind === 'ones') chunk.fill(1);
    else {
      const std = tensor.init.std;
      for (let i = 0; i < n; i++) chunk[i] = gaussian.next() * std;
    }
    if (halves) {
      const out = halves.subarray(0, n);
      toF16(chunk, out);
      yield new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
    } else yield new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  }
}

/** Standard normal values by the Box-Muller transform, two per pair of uniforms. */
class Gaussian {
  readonly #rng: Rng;
  #spare = 0;
  #hasSpare = false;
  constructor(rng: Rng) {
    this.#rng = rng;
  }
  next(): number {
    if (this.#hasSpare) {
      this.#hasSpare = false;
      return this.#spare;
    }
    const u = 1 - this.#rng.next(); // (0, 1]: log(u) is finite
    const v = this.#rng.next();
    const r = Math.sqrt(-2 * Math.log(u));
    this.#spare = r * Math.sin(2 * Math.PI * v);
    this.#hasSpare = true;
    return r * Math.cos(2 * Math.PI * v);
  }
}
