/**
 * Normal values from one table lookup: 65,536 quantiles of the standard normal distribution,
 * z_k = Φ⁻¹((k + 0.5) / 65536), indexed by 16 random bits. Two weights per 32-bit draw and no
 * logarithm per value make Llama 3's 33M-value embedding matrix a fraction of a second to fill;
 * the values are a 65,536-level quantisation of N(0, 1), finer than F16 itself near zero.
 * Φ⁻¹ is Acklam's rational approximation (relative error below 1.2e-9).
 */
import { f16Bits } from './f16.ts';

export const NORMAL_LEVELS = 1 << 16;

const A = [
  -39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716,
  2.506628277459239,
];
const B = [
  -54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572,
];
const C = [
  -0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734,
  4.374664141464968, 2.938163982698783,
];
const D = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
const P_LOW = 0.02425;

/** Φ⁻¹(p) for p in (0, 1). */
export function normalQuantile(p: number): number {
  if (p < P_LOW) return tail(Math.sqrt(-2 * Math.log(p)));
  if (p > 1 - P_LOW) return -tail(Math.sqrt(-2 * Math.log(1 - p)));
  const q = p - 0.5;
  const r = q * q;
  const num = (((((A[0]! * r + A[1]!) * r + A[2]!) * r + A[3]!) * r + A[4]!) * r + A[5]!) * q;
  const den = ((((B[0]! * r + B[1]!) * r + B[2]!) * r + B[3]!) * r + B[4]!) * r + 1;
  return num / den;
}

function tail(q: number): number {
  const num = ((((C[0]! * q + C[1]!) * q + C[2]!) * q + C[3]!) * q + C[4]!) * q + C[5]!;
  const den = (((D[0]! * q + D[1]!) * q + D[2]!) * q + D[3]!) * q + 1;
  return num / den;
}

let quantiles: Float64Array | null = null;

/** z_k for k in [0, 65536). */
export function normalQuantiles(): Float64Array {
  if (!quantiles) {
    quantiles = new Float64Array(NORMAL_LEVELS);
    for (let k = 0; k < NORMAL_LEVELS; k++)
      quantiles[k] = normalQuantile((k + 0.5) / NORMAL_LEVELS);
  }
  return quantiles;
}

const f16Tables = new Map<number, Uint16Array>();

/** The half-precision bits of std x z_k. */
export function normalF16Table(std: number): Uint16Array {
  let table = f16Tables.get(std);
  if (!table) {
    const z = normalQuantiles();
    const scaled = new Float32Array(NORMAL_LEVELS);
    for (let k = 0; k < NORMAL_LEVELS; k++) scaled[k] = z[k]! * std;
    const bits = new Uint32Array(scaled.buffer);
    table = new Uint16Array(NORMAL_LEVELS);
    for (let k = 0; k < NORMAL_LEVELS; k++) table[k] = f16Bits(bits[k]!);
    f16Tables.set(std, table);
  }
  return table;
}
