/**
 * The tiny llama-architecture model: its shape, its llama.* metadata and its tensor set, as
 * llama.cpp's `LLM_ARCH_LLAMA` loads them (`src/llama-arch.cpp`, `src/llama-model.cpp`). No
 * `output.weight`: llama.cpp then uses `token_embd.weight` for the output (tied embeddings),
 * which keeps Llama 3's 128k-row matrix in the file once.
 */
import { f32, GgmlType, type GgufKv, type GgufTensorInfo, u32 } from './ggufFormat.ts';

export interface TinyShape {
  layers: number;
  /** Model width (`llama.embedding_length`). */
  dim: number;
  heads: number;
  kvHeads: number;
  /** Hidden width of the feed-forward block. */
  ffn: number;
  contextTokens: number;
}

export const DEFAULT_SHAPE: TinyShape = {
  layers: 4,
  dim: 256,
  heads: 4,
  kvHeads: 2,
  ffn: 768,
  contextTokens: 4096,
};

/** Llama 3's. */
export const ROPE_FREQ_BASE = 500_000;
export const RMS_NORM_EPS = 1e-5;

/** How a tensor is filled: seeded normal values times a scale, or all ones (the norms). */
export type TensorInit = { kind: 'normal'; std: number } | { kind: 'ones' };

export interface TinyTensor extends GgufTensorInfo {
  init: TensorInit;
}

/**
 * Matrices: N(0, 0.02^2), GPT-2's initialisation. Through an RMS norm of weight 1 each projection
 * gives values of about 0.02 x sqrt(width), so activations and logits stay small and finite.
 */
export const WEIGHT_STD = 0.02;

/** A reason the shape cannot be a llama model, naming the flags; null when it can. */
export function shapeProblem(shape: TinyShape): string | null {
  for (const [flag, n] of [
    ['--layers', shape.layers],
    ['--dim', shape.dim],
    ['--heads', shape.heads],
    ['--kv-heads', shape.kvHeads],
    ['--ffn', shape.ffn],
    ['--context', shape.contextTokens],
  ] as const) {
    if (!Number.isInteger(n) || n < 1) return `${flag} must be a positive integer, got ${n}`;
  }
  if (shape.dim % shape.heads !== 0) {
    return `--dim ${shape.dim} must be a multiple of --heads ${shape.heads}`;
  }
  if ((shape.dim / shape.heads) % 2 !== 0) {
    return `--dim / --heads (the head width, ${shape.dim / shape.heads}) must be even for RoPE`;
  }
  if (shape.heads % shape.kvHeads !== 0) {
    return `--heads ${shape.heads} must be a multiple of --kv-heads ${shape.kvHeads}`;
  }
  return null;
}

export function llamaMetadata(shape: TinyShape): GgufKv[] {
  const headDim = shape.dim / shape.heads;
  return [
    ['llama.context_length', u32(shape.contextTokens)],
    ['llama.embedding_length', u32(shape.dim)],
    ['llama.block_count', u32(shape.layers)],
    ['llama.feed_forward_length', u32(shape.ffn)],
    ['llama.attention.head_count', u32(shape.heads)],
    ['llama.attention.head_count_kv', u32(shape.kvHeads)],
    ['llama.attention.layer_norm_rms_epsilon', f32(RMS_NORM_EPS)],
    ['llama.rope.freq_base', f32(ROPE_FREQ_BASE)],
    ['llama.rope.dimension_count', u32(headDim)],
    ['general.file_type', u32(1)], // LLAMA_FTYPE_MOSTLY_F16
  ];
}

/** The tensors in file order: embeddings, each block, the final norm. */
export function llamaTensors(shape: TinyShape, vocabSize: number): TinyTensor[] {
  const { dim, ffn } = shape;
  const kvDim = (dim / shape.heads) * shape.kvHeads;
  const normal: TensorInit = { kind: 'normal', std: WEIGHT_STD };
  const ones: TensorInit = { kind: 'ones' };
  const matrix = (name: string, cols: number, rows: number): TinyTensor => ({
    name,
    dims: [cols, rows],
    type: GgmlType.F16,
    init: normal,
  });
  const norm = (name: string): TinyTensor => ({
    name,
    dims: [dim],
    type: GgmlType.F32,
    init: ones,
  });
  const tensors: TinyTensor[] = [matrix('token_embd.weight', dim, vocabSize)];
  for (let i = 0; i < shape.layers; i++) {
    const b = `blk.${i}`;
    tensors.push(
      norm(`${b}.attn_norm.weight`),
      matrix(`${b}.attn_q.weight`, dim, dim),
      matrix(`${b}.attn_k.weight`, dim, kvDim),
      matrix(`${b}.attn_v.weight`, dim, kvDim),
      matrix(`${b}.attn_output.weight`, dim, dim),
      norm(`${b}.ffn_norm.weight`),
      matrix(`${b}.ffn_gate.weight`, dim, ffn),
      matrix(`${b}.ffn_up.weight`, dim, ffn),
      matrix(`${b}.ffn_down.weight`, ffn, dim),
    );
  }
  tensors.push(norm('output_norm.weight'));
  return tensors;
}
