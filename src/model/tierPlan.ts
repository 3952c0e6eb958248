/**
 * The router seed's "does the prefix set fit" check over two tiers: the GPU pool's room for
 * prefixes (plan.ts) and a CPU tier of `cpuKvGiB` per replica (vLLM's --kv-offloading-size),
 * and what a CPU hit costs against the prefill a hit saves. Pure arithmetic.
 *
 *   cpu tier tokens   = floor(GiB x 2^30 / (KV bytes per token x block)) x block (vLLM's blocks)
 *   prefixes in CPU   = floor(cpu tier tokens / shared tokens)
 *   reload a prefix   = shared tokens x KV bytes per token / PCIe bytes per s
 *   replicas to hold the set once = ceil(prefixes / (GPU prefixes + CPU prefixes per replica))
 */
import { kvBytesPerToken, type ReplicaSpec } from './cost.ts';
import type { LoadInput, RouterPlan } from './plan.ts';

export interface TierPlanInput {
  cpuKvGiB: number;
  /** Host-to-GPU copy bandwidth, GB/s. */
  cpuKvGbps: number;
  /** Tokens per KV block (the tier holds whole blocks). */
  blockSize: number;
}

export interface TierPlan {
  cpuKvGiB: number;
  cpuKvGbps: number;
  cpuTierTokens: number;
  /** Prefixes the GPU pool has room for (plan.ts) and the CPU tier holds, per replica. */
  gpuPrefixesPerReplica: number;
  cpuPrefixesPerReplica: number;
  prefixesPerReplica: number;
  /** The whole prefix set in the two tiers of one replica. */
  prefixSetFitsOneReplica: boolean;
  /** Replicas that hold every prefix once, GPU tiers alone and both tiers. */
  replicasToHoldSetGpu: number | null;
  replicasToHoldSet: number | null;
  /** Reloading one shared prefix from the CPU tier, against the prefill a hit saves. */
  reloadMs: number;
  hitSavesMs: number;
  /** A CPU hit costs this share of a miss's prefill (the router's credit, cpuHitCredit.ts). */
  reloadShareOfMiss: number;
}

export function planTiers(
  spec: ReplicaSpec,
  load: LoadInput,
  router: RouterPlan,
  input: TierPlanInput,
): TierPlan {
  const bytesPerToken = kvBytesPerToken(spec.model, spec.kvDtype);
  const blocks = Math.floor((input.cpuKvGiB * 2 ** 30) / (bytesPerToken * input.blockSize));
  const cpuTierTokens = blocks * input.blockSize;
  const gpu = router.prefixesPerReplica;
  const cpu = load.sharedTokens > 0 ? Math.floor(cpuTierTokens / load.sharedTokens) : 0;
  const perReplica = gpu + cpu;
  const reloadMs = (load.sharedTokens * bytesPerToken) / (input.cpuKvGbps * 1e6);
  return {
    cpuKvGiB: input.cpuKvGiB,
    cpuKvGbps: input.cpuKvGbps,
    cpuTierTokens,
    gpuPrefixesPerReplica: gpu,
    cpuPrefixesPerReplica: cpu,
    prefixesPerReplica: perReplica,
    prefixSetFitsOneReplica: perReplica >= load.prefixes,
    replicasToHoldSetGpu: gpu > 0 ? Math.ceil(load.prefixes / gpu) : null,
    replicasToHoldSet: perReplica > 0 ? Math.ceil(load.prefixes / perReplica) : null,
    reloadMs,
    hitSavesMs: router.hitSavesMs,
    reloadShareOfMiss: router.hitSavesMs > 0 ? reloadMs / router.hitSavesMs : 0,
  };
}
