/**
 * float32 to IEEE 754 half precision, rounding to nearest even, with subnormals, infinities and
 * NaN (Node 20 has no Float16Array). Works on a whole array at once through a Uint32 view.
 */

/** Half-precision bits of each value of `src`, into `dst` (same length). */
export function toF16(src: Float32Array, dst: Uint16Array): void {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < bits.length; i++) dst[i] = f16Bits(bits[i]!);
}

/** One float32 (as its bits) to half-precision bits. */
export function f16Bits(b: number): number {
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rest > halfway || (rest === halfway && (half & 1) === 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1)) half++;
  return sign | half;
}
