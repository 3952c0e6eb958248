/**
 * GGUF v3 as llama.cpp reads it (`ggml/include/gguf.h`, `ggml/src/gguf.cpp`): the numbers here are
 * upstream's; everything is little-endian.
 *
 *   magic "GGUF" | u32 version (3) | u64 tensor count | u64 key-value count
 *   key-values:   string key | u32 value type | value   (an array: u32 item type | u64 count | items)
 *   tensor infos: string name | u32 dims | u64 ne[dims] (ne0 first) | u32 ggml type | u64 offset
 *   padding to `general.alignment` (32 when absent), then the data: each tensor at its offset from
 *   the data start, a multiple of the alignment.
 *
 * A string is a u64 byte length and UTF-8 bytes, with no terminator.
 */

export const GGUF_MAGIC = 'GGUF';
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32;

/** `enum gguf_type`. */
export const GgufType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;

/** The two `enum ggml_type` values kvroute writes, with their bytes per element. */
export const GgmlType = { F32: 0, F16: 1 } as const;
export type GgmlTypeId = (typeof GgmlType)[keyof typeof GgmlType];
export const GGML_TYPE_BYTES: Record<GgmlTypeId, number> = { 0: 4, 1: 2 };

/** `llama_token_type` (the `tokenizer.ggml.token_type` values). */
export const TokenType = {
  NORMAL: 1,
  UNKNOWN: 2,
  CONTROL: 3,
  USER_DEFINED: 4,
  UNUSED: 5,
  BYTE: 6,
} as const;

/** A metadata value with its GGUF type. Numbers stay JS numbers: every kvroute count fits. */
export type GgufValue =
  | { type: 'u32' | 'i32' | 'f32'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'strings'; value: readonly string[] }
  | { type: 'i32s'; value: ArrayLike<number> };

export type GgufKv = readonly [key: string, value: GgufValue];

export const u32 = (value: number): GgufValue => ({ type: 'u32', value });
export const f32 = (value: number): GgufValue => ({ type: 'f32', value });
export const bool = (value: boolean): GgufValue => ({ type: 'bool', value });
export const str = (value: string): GgufValue => ({ type: 'string', value });
export const strings = (value: readonly string[]): GgufValue => ({ type: 'strings', value });
export const i32s = (value: ArrayLike<number>): GgufValue => ({ type: 'i32s', value });

/** One tensor's info: `dims` ne0 first (a matrix with n columns of input width has ne0 = width). */
export interface GgufTensorInfo {
  name: string;
  dims: readonly number[];
  type: GgmlTypeId;
}

export function tensorBytes(info: GgufTensorInfo): number {
  return info.dims.reduce((n, d) => n * d, 1) * GGML_TYPE_BYTES[info.type];
}

export function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}
