/**
 * Hardware and model catalog, each entry with its source. GPU figures are the vendors' datasheet
 * numbers for dense math (no sparsity), with an hourly list price from a named, dated public
 * price sheet (`--price GPU=$/h` overrides it); model figures are from each model's published
 * Hugging Face `config.json` (num_hidden_layers, num_key_value_heads, head_dim, hidden_size,
 * num_attention_heads), and its parameter counts from its model card.
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
  /** Where the figures above come from. */
  source: string;
  /** On-demand list price of one GPU, $/h, and the sheet it is from. */
  price: GpuPrice;
}

export interface GpuPrice {
  dollarsPerHour: number;
  /** The price sheet, named. */
  sheet: string;
  /** When the sheet said so (YYYY-MM or YYYY-MM-DD). */
  asOf: string;
}

/** The sheet most GPU prices come from (RunPod's on-demand list as tabulated, March 2026). */
const RUNPOD_2026_03 =
  "RunPod on-demand list, as tabulated in deploybase.ai's 'RunPod GPU Pricing: 2026' (https://deploybase.ai/articles/runpod-gpu-pricing)";

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
  /** The config.json the shape comes from. */
  source: string;
}

const hf = (repo: string): string => `https://huggingface.co/${repo}/blob/main/config.json`;

export const GPUS: Readonly<Record<string, GpuSpec>> = {
  'h100-sxm': {
    name: 'h100-sxm',
    displayName: 'H100 SXM 80GB',
    bf16Flops: 989.4e12,
    fp8Flops: 1979e12,
    hbmBytes: 80e9,
    hbmBytesPerS: 3.35e12,
    source: 'NVIDIA H100 Tensor Core GPU datasheet (SXM)',
    price: { dollarsPerHour: 4.76, sheet: RUNPOD_2026_03, asOf: '2026-03' },
  },
  h200: {
    name: 'h200',
    displayName: 'H200 SXM 141GB',
    bf16Flops: 989.4e12,
    fp8Flops: 1979e12,
    hbmBytes: 141e9,
    hbmBytesPerS: 4.8e12,
    source: 'NVIDIA H200 Tensor Core GPU datasheet (SXM)',
    price: { dollarsPerHour: 6.35, sheet: RUNPOD_2026_03, asOf: '2026-03' },
  },
  b200: {
    name: 'b200',
    displayName: 'B200 180GB',
    bf16Flops: 2250e12,
    fp8Flops: 4500e12,
    hbmBytes: 180e9,
    hbmBytesPerS: 8e12,
    source: 'NVIDIA DGX B200 datasheet, per GPU',
    price: { dollarsPerHour: 10.57, sheet: RUNPOD_2026_03, asOf: '2026-03' },
  },
  'a100-80gb': {
    name: 'a100-80gb',
    displayName: 'A100 SXM 80GB',
    bf16Flops: 312e12,
    fp8Flops: null,
    hbmBytes: 80e9,
    hbmBytesPerS: 2.039e12,
    source: 'NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB)',
    price: { dollarsPerHour: 2.45, sheet: RUNPOD_2026_03, asOf: '2026-03' },
  },
  'a100-40gb': {
    name: 'a100-40gb',
    displayName: 'A100 SXM 40GB',
    bf16Flops: 312e12,
    fp8Flops: null,
    hbmBytes: 40e9,
    hbmBytesPerS: 1.555e12,
    source: 'NVIDIA A100 Tensor Core GPU datasheet (SXM 40GB)',
    price: {
      dollarsPerHour: 32.7726 / 8,
      sheet:
        'Amazon EC2 On-Demand pricing, p4d.24xlarge (8 x A100 40GB), us-east-1, Linux, per GPU',
      asOf: '2024-06',
    },
  },
  l4: {
    name: 'l4',
    displayName: 'L4 24GB',
    // Dense figures (the datasheet's 242 / 485 TFLOP/s are with sparsity); Ada, FP8 tensor cores.
    bf16Flops: 121e12,
    fp8Flops: 242.5e12,
    hbmBytes: 24e9,
    hbmBytesPerS: 300e9,
    source: 'NVIDIA L4 Tensor Core GPU datasheet',
    price: {
      dollarsPerHour: 0.8048,
      sheet: 'Amazon EC2 On-Demand pricing, g6.xlarge (1 x L4), us-east-1, Linux',
      asOf: '2024-06',
    },
  },
  l40s: {
    name: 'l40s',
    displayName: 'L40S 48GB',
    bf16Flops: 362.05e12,
    fp8Flops: 733e12,
    hbmBytes: 48e9,
    hbmBytesPerS: 864e9,
    source: 'NVIDIA L40S datasheet',
    price: { dollarsPerHour: 1.4, sheet: RUNPOD_2026_03, asOf: '2026-03' },
  },
  a10g: {
    name: 'a10g',
    displayName: 'A10G 24GB',
    // AWS's A10G (the G5 instances): 70 TFLOP/s dense FP16/BF16 tensor, 600 GB/s GDDR6; Ampere,
    // no FP8 tensor cores.
    bf16Flops: 70e12,
    fp8Flops: null,
    hbmBytes: 24e9,
    hbmBytesPerS: 600e9,
    source: 'AWS EC2 G5 instance page (NVIDIA A10G)',
    price: {
      dollarsPerHour: 1.006,
      sheet: 'Amazon EC2 On-Demand pricing, g5.xlarge (1 x A10G), us-east-1, Linux',
      asOf: '2026-09',
    },
  },
  mi300x: {
    name: 'mi300x',
    displayName: 'AMD Instinct MI300X 192GB',
    bf16Flops: 1307.4e12,
    fp8Flops: 2614.9e12,
    hbmBytes: 192e9,
    hbmBytesPerS: 5.3e12,
    source: 'AMD Instinct MI300X data sheet',
    price: {
      dollarsPerHour: 1.5,
      sheet:
        "TensorWave on-demand, as quoted in Cliff Center's research note 'AMD inference economics' (https://www.cliffcenter.com/research/amd-inference-economics)",
      asOf: '2026-05-18',
    },
  },
};

/** Llama 3.1 70B and 3.3 70B: one architecture, one context length. */
const LLAMA_3_70B_SHAPE = {
  totalParams: 70.55e9,
  activeParams: 70.55e9,
  layers: 80,
  kvHeads: 8,
  headDim: 128,
  hiddenSize: 8192,
  attentionHeads: 64,
  maxModelLen: 131072,
} as const;

/**
 * Mistral 7B's layers and context; Mixtral 8x7B has the same attention (its experts are the MLPs,
 * config.json of mistralai/Mixtral-8x7B-Instruct-v0.1 and Mistral-7B-Instruct-v0.3).
 */
const MISTRAL_7B_LAYERS = {
  layers: 32,
  kvHeads: 8,
  headDim: 128,
  hiddenSize: 4096,
  attentionHeads: 32,
  maxModelLen: 32768,
} as const;

export const MODELS: Readonly<Record<string, ModelSpec>> = {
  'llama-3.3-70b': {
    name: 'llama-3.3-70b',
    displayName: 'Llama 3.3 70B Instruct',
    ...LLAMA_3_70B_SHAPE,
    source: hf('meta-llama/Llama-3.3-70B-Instruct'),
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
    source: hf('meta-llama/Llama-2-70b-hf'),
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
    source: hf('meta-llama/Llama-3.1-8B-Instruct'),
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
    source: hf('meta-llama/Llama-3.1-405B-Instruct'),
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
    source: hf('Qwen/Qwen2.5-72B-Instruct'),
  },
  'mixtral-8x7b': {
    name: 'mixtral-8x7b',
    displayName: 'Mixtral 8x7B Instruct (MoE, 2 of 8 experts)',
    totalParams: 46.7e9,
    activeParams: 12.9e9,
    ...MISTRAL_7B_LAYERS,
    source: hf('mistralai/Mixtral-8x7B-Instruct-v0.1'),
  },
  'llama-3.1-70b': {
    name: 'llama-3.1-70b',
    displayName: 'Llama 3.1 70B Instruct',
    ...LLAMA_3_70B_SHAPE,
    source: hf('meta-llama/Llama-3.1-70B-Instruct'),
  },
  'qwen2.5-7b': {
    name: 'qwen2.5-7b',
    displayName: 'Qwen2.5 7B Instruct',
    totalParams: 7.62e9,
    activeParams: 7.62e9,
    layers: 28,
    kvHeads: 4,
    headDim: 128,
    hiddenSize: 3584,
    attentionHeads: 28,
    maxModelLen: 32768,
    source: hf('Qwen/Qwen2.5-7B-Instruct'),
  },
  'qwen3-8b': {
    name: 'qwen3-8b',
    displayName: 'Qwen3 8B',
    totalParams: 8.19e9,
    activeParams: 8.19e9,
    layers: 36,
    kvHeads: 8,
    headDim: 128,
    hiddenSize: 4096,
    attentionHeads: 32,
    maxModelLen: 40960,
    source: hf('Qwen/Qwen3-8B'),
  },
  'qwen3-32b': {
    name: 'qwen3-32b',
    displayName: 'Qwen3 32B',
    totalParams: 32.8e9,
    activeParams: 32.8e9,
    layers: 64,
    kvHeads: 8,
    // Qwen3 sets head_dim apart from hidden_size / num_attention_heads (5120 / 64 = 80).
    headDim: 128,
    hiddenSize: 5120,
    attentionHeads: 64,
    maxModelLen: 40960,
    source: hf('Qwen/Qwen3-32B'),
  },
  'mistral-7b': {
    name: 'mistral-7b',
    displayName: 'Mistral 7B Instruct v0.3',
    totalParams: 7.25e9,
    activeParams: 7.25e9,
    ...MISTRAL_7B_LAYERS,
    source: hf('mistralai/Mistral-7B-Instruct-v0.3'),
  },
  'qwen3-30b-a3b': {
    name: 'qwen3-30b-a3b',
    displayName: 'Qwen3 30B-A3B (MoE, 8 of 128 experts)',
    totalParams: 30.5e9,
    activeParams: 3.3e9,
    layers: 48,
    kvHeads: 4,
    headDim: 128,
    hiddenSize: 2048,
    attentionHeads: 32,
    maxModelLen: 40960,
    source: hf('Qwen/Qwen3-30B-A3B'),
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
