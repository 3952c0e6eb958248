/**
 * A backend's CPU tier in blocks, for the approximate index (src/router/index/approxIndex.ts), from its
 * `kv-offloading-size` (GiB, vLLM's `--kv-offloading-size`) or `cpu-kv-blocks` (the
 * OffloadingConnector's `num_cpu_blocks`). GiB become blocks as the engine counts them,
 * `GiB x 2^30 / (KV bytes per token x block size)` (src/engine/options.ts `cpuBlocksOf`), with
 * the KV bytes of the backend's model: its `model` when that is a catalog name, else the
 * engine's default, Llama 3.3 70B (327,680 B per token), as backendSpeed.ts picks it. A model
 * outside the catalog: give `cpu-kv-blocks`. Neither key: undefined (GPU only). `kv-blocks`
 * sizes its GPU record (its engine's pool), so the record ages blocks out where the engine would.
 */
import { cpuBlocksOf, ENGINE_DEFAULTS } from '../engine/options.ts';
import { MODELS } from '../model/catalog.ts';
import { kvBytesPerToken } from '../model/cost.ts';
import { makeReplicaSpec } from '../model/spec.ts';
import type { ApproxTiers } from '../router/index.ts';
import type { BackendConfig } from './backendConfig.ts';

/** The backend's tiers for the approximate index: its `kv-blocks` and its CPU tier. */
export function backendApproxTiers(b: BackendConfig, blockSize: number): ApproxTiers | undefined {
  const cpuKvBlocks = backendCpuKvBlocks(b, blockSize);
  if (b.kvBlocks === undefined && cpuKvBlocks === undefined) return undefined;
  return {
    ...(b.kvBlocks !== undefined && { kvBlocks: b.kvBlocks }),
    ...(cpuKvBlocks !== undefined && { cpuKvBlocks }),
  };
}

export function backendCpuKvBlocks(b: BackendConfig, blockSize: number): number | undefined {
  if (b.cpuKvBlocks !== undefined) return b.cpuKvBlocks;
  if (b.kvOffloadingSizeGiB === undefined) return undefined;
  const named = b.model?.toLowerCase();
  const model = named !== undefined && Object.hasOwn(MODELS, named) ? named : ENGINE_DEFAULTS.model;
  const spec = makeReplicaSpec({ model, gpu: ENGINE_DEFAULTS.gpu, tp: ENGINE_DEFAULTS.tp });
  return cpuBlocksOf(b.kvOffloadingSizeGiB, kvBytesPerToken(spec.model, spec.kvDtype), blockSize);
}
