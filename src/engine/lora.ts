/**
 * LoRA adapters in the engine core: the config (vLLM's --max-loras, --max-cpu-loras,
 * --max-lora-rank), the modelled time to load an adapter, and which adapters are resident.
 *
 * Residency follows vLLM's worker: an LRU cache of `maxCpuLoras` adapters (default `maxLoras`)
 * that the running batch draws from. An adapter outside it is read from storage and copied to
 * the GPU before the first step that runs it; that step takes `loadMs` longer:
 *
 *   adapterBytes = rank x layers x modules x 2 matrices x hiddenSize x dtypeBytes
 *   loadMs       = adapterBytes / loadBytesPerS x 1000
 *
 * A LoRA pair of one projection is A (hiddenSize x rank) and B (rank x hiddenSize); `modules` is
 * the four attention projections (q, k, v, o), each taken as hiddenSize wide; the rank is
 * --max-lora-rank (vLLM sizes its adapter slots by it); BF16 weights (vLLM's lora_dtype `auto`).
 * The bandwidth is a local NVMe read (2 GB/s), the slowest link from storage to HBM: copying
 * from host memory over PCIe (tens of GB/s) or within HBM would be one to three orders faster.
 * Llama 3.3 70B at rank 16: 16 x 80 x 4 x 2 x 8,192 x 2 B = 167.8 MB, 83.9 ms, which is 1,177
 * prefill tokens at the seed replica's 71.3 us per token.
 */
import type { ModelSpec } from '../model/catalog.ts';
import { EngineError } from '../scheduler/errors.ts';

/** vLLM's defaults (vllm/config/lora.py). */
export const DEFAULT_MAX_LORAS = 1;
export const DEFAULT_MAX_LORA_RANK = 16;
/** vLLM's accepted --max-lora-rank values. */
export const LORA_RANKS = [1, 8, 16, 32, 64, 128, 256, 320, 512] as const;
/** q, k, v and o projections. */
export const LORA_TARGET_MODULES = 4;
export const LORA_DTYPE_BYTES = 2;
/** Storage read bandwidth for an adapter outside the cache, GB/s (see the file comment). */
export const DEFAULT_LORA_LOAD_GBPS = 2;

export interface LoraConfig {
  /** Most distinct adapters in one step (>= 1). */
  maxLoras: number;
  /** Adapters kept resident (>= maxLoras); default maxLoras. */
  maxCpuLoras?: number;
  /** Rank the adapter slots are sized for; default 16. */
  maxLoraRank?: number;
  /** Storage-to-GPU bandwidth for a load, GB/s; default 2. */
  loadGBps?: number;
}

export interface ResolvedLoraConfig {
  maxLoras: number;
  maxCpuLoras: number;
  maxLoraRank: number;
  loadGBps: number;
}

function fail(message: string): never {
  throw new EngineError('ERR_CONFIG', message);
}

export function resolveLoraConfig(config: LoraConfig): ResolvedLoraConfig {
  const { maxLoras } = config;
  if (!Number.isInteger(maxLoras) || maxLoras < 1) {
    fail(`max_loras must be an integer >= 1, got ${maxLoras}`);
  }
  const maxCpuLoras = config.maxCpuLoras ?? maxLoras;
  if (!Number.isInteger(maxCpuLoras) || maxCpuLoras < maxLoras) {
    // vLLM's LoRAConfig check, word for word.
    fail(`max_cpu_loras (${maxCpuLoras}) must be >= max_loras (${maxLoras})`);
  }
  const maxLoraRank = config.maxLoraRank ?? DEFAULT_MAX_LORA_RANK;
  if (!(LORA_RANKS as readonly number[]).includes(maxLoraRank)) {
    fail(`max_lora_rank must be one of ${LORA_RANKS.join(', ')}, got ${maxLoraRank}`);
  }
  const loadGBps = config.loadGBps ?? DEFAULT_LORA_LOAD_GBPS;
  if (!(loadGBps > 0 && Number.isFinite(loadGBps))) {
    fail(`LoRA load bandwidth must be a finite number > 0 GB/s, got ${loadGBps}`);
  }
  return { maxLoras, maxCpuLoras, maxLoraRank, loadGBps };
}

/** Bytes of one adapter at `rank` for `model` (see the file comment). */
export function loraAdapterBytes(model: ModelSpec, rank: number): number {
  return rank * model.layers * LORA_TARGET_MODULES * 2 * model.hiddenSize * LORA_DTYPE_BYTES;
}

/** Milliseconds to load one adapter that is not resident. */
export function loraLoadMs(model: ModelSpec, config: ResolvedLoraConfig): number {
  return (loraAdapterBytes(model, config.maxLoraRank) / (config.loadGBps * 1e9)) * 1e3;
}

/**
 * The resident adapters, least recently used first. A load evicts the least recently used
 * adapter that no running request uses; with capacity >= max_loras there always is one.
 */
export class AdapterCache {
  readonly capacity: number;
  /** Insertion order is recency order: a touch deletes and re-inserts. */
  readonly #resident = new Set<string>();

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  has(name: string): boolean {
    return this.#resident.has(name);
  }

  /**
   * Marks `name` used now, loading it if it is not resident; true when it had to be loaded.
   * `inUse` are the adapters of running requests, never evicted.
   */
  touch(name: string, inUse: ReadonlyMap<string, unknown>): boolean {
    if (this.#resident.delete(name)) {
      this.#resident.add(name);
      return false;
    }
    if (this.#resident.size >= this.capacity) {
      for (const victim of this.#resident) {
        if (!inUse.has(victim)) {
          this.#resident.delete(victim);
          break;
        }
      }
    }
    // Full of adapters in use (capacity below the running set): it runs, but is not kept.
    if (this.#resident.size < this.capacity) this.#resident.add(name);
    return true;
  }

  /** Drops `name` (an unloaded adapter); false when it was not resident. */
  remove(name: string): boolean {
    return this.#resident.delete(name);
  }

  /** Resident adapters, least recently used first (a copy). */
  names(): string[] {
    return [...this.#resident];
  }
}
