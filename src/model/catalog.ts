/**
 * Hardware and model catalog. GPU figures are the vendors' datasheet numbers for dense math
 * (no sparsity); model figures are from the published configs.
 */
export type Dtype = 'bf16' | 'fp8';
export const DTYPES: readonly Dtype[] = ['bf16', 'fp8'];

export interface GpuSpec {
  name: string;
  displayName: string;
  /** Dense BF16 tensor FLOP/s. */
  bf16Flops: number;
  /** Dense FP8 tensor FLOP/s; null where the GPU has no FP8 tensor cores (A100). */
  fp8Flops: number | null;
  hbmBytes: number;
  hbmBytesPerS: number;
}

export interface ModelSpec {
  name: string;
  displayName: string;
  /** Parameters held in memory. */
  totalParams: number;
  /** Parameters each token passes through (equal to totalParams for dense models). */
  activeParams: number;
  layers: number;
  kvHeads: number;
  headDim: number;
  hiddenSize: number;
  attentionHeads: number;
  maxModelLen: number;
}

export const GPUS: Readonly<Record<string, GpuSpec>> = {
  'h100-sxm': {
    name: 'h100-sxm',
    displayName: 'H100 SXM 80GB',
    bf16Flops: 989.4e12,
    fp8Flops: 1979e12,
    hbmBytes: 80e9,
    hbmBytesPerS: 3.35e12,
  },
  h200: {
    name: 'h200',
    displayName: 'H200 SXM 141GB',
    bf16Flops: 989.4e12,
    fp8Flops: 1979e12,
    hbmBytes: 141e9,
    hbmBytesPerS: 4.8e12,
  },
  b200: {
    name: 'b200',
    displayName: 'B200 180GB',
    bf16Flops: 2250e12,
    fp8Flops: 4500e12,
    hbmBytes: 180e9,
    hbmBytesPerS: 8e12,
  },
  'a100-80gb': {
    name: 'a100-80gb',
    displayName: 'A100 SXM 80GB',
    bf16Flops: 312e12,
    fp8Flops: null,
    hbmBytes: 80e9,
    hbmBytesPerS: 2.039e12,
  },
  l40s: {
    name: 'l40s',
    displayName: 'L40S 48GB',
    bf16Flops: 362.05e12,
    fp8Flops: 733e12,
    hbmBytes: 48e9,
    hbmBytesPerS: 864e9,
  },
};

export const MODELS: Readonly<Record<string, ModelSpec>> = {
  'llama-3.3-70b': {
    name: 'llama-3.3-70b',
    displayName: 'Llama 3.3 70B Instruct',
    totalParams: 70.55e9,
    activeParams: 70.55e9,
    layers: 80,
    kvHeads: 8,
    headDim: 128,
    hiddenSize: 8192,
    attentionHeads: 64,
    maxModelLen: 131072,
  },
  // Vidur's published H100 and A100 profiles are of this model (a source for `kvroute calibrate`).
  'llama-2-70b': {
    name: 'llama-2-70b',
    displayName: 'Llama 2 70B',
    totalParams: 68.98e9,
    activeParams: 68.98e9,
    layers: 80,
    kvHeads: 8,
    headDim: 128,
    hiddenSize: 8192,
    attentionHeads: 64,
    maxModelLen: 4096,
  },
  'llama-3.1-8b': {
    name: 'llama-3.1-8b',
    displayName: 'Llama 3.1 8B Instruct',
    totalParams: 8.03e9,
    activeParams: 8.03e9,
    layers: 32,
    kvHeads: 8,
    headDim: 128,
    hiddenSize: 4096,
    attentionHeads: 32,
    maxModelLen: 131072,
  },
  'llama-3.1-405b': {
    name: 'llama-3.1-405b',
    displayName: 'Llama 3.1 405B Instruct',
    totalParams: 405.85e9,
    activeParams: 405.85e9,
    layers: 126,
    kvHeads: 8,
    headDim: 128,
    hiddenSize: 16384,
    attentionHeads: 128,
    maxModelLen: 131072,
  },
  'qwen2.5-72b': {
    name: 'qwen2.5-72b',
    displayName: 'Qwen2.5 72B Instruct',
    totalParams: 72.71e9,
    activeParams: 72.71e9,
    layers: 80,
    kvHeads: 8,
    headDim: 128,
    hiddenSize: 8192,
    attentionHeads: 64,
    maxModelLen: 32768,
  },
  'mixtral-8x7b': {
    name: 'mixtral-8x7b',
    displayName: 'Mixtral 8x7B Instruct (MoE, 2 of 8 experts)',
    totalParams: 46.7e9,
    activeParams: 12.9e9,
    layers: 32,
    kvHeads: 8,
    headDim: 128,
    hiddenSize: 4096,
    attentionHeads: 32,
    maxModelLen: 32768,
  },
};

export class CatalogError extends Error {
  readonly code = 'ERR_UNKNOWN_NAME';
}

function lookup<T>(table: Readonly<Record<string, T>>, kind: string, name: string): T {
  const found = table[name.toLowerCase()];
  if (!found) {
    throw new CatalogError(`unknown ${kind} '${name}'; known: ${Object.keys(table).join(', ')}`);
  }
  return found;
}

export const gpuByName = (name: string): GpuSpec => lookup(GPUS, 'GPU', name);
export const modelByName = (name: string): ModelSpec => lookup(MODELS, 'model', name);
