/**
 * `aibrix`, AIBrix's prefix-cache policy, with running = in-flight requests (router ledger):
 * 1. if max - min running > 16: the least running replica;
 * 2. otherwise replicas with a prefix match, by match % (cached / prompt blocks) descending,
 *    then running ascending; the first whose running <= mean + 2 sigma (over all eligible);
 * 3. no match, or none under that bound: the least running.
 */
import type { Pick, PickInput, Policy } from '../policy.ts';
import { argMin } from './pickBest.ts';

export const DEFAULT_AIBRIX_IMBALANCE_RUNNING = 16;
export const DEFAULT_AIBRIX_STDDEV_FACTOR = 2;

export interface AibrixOptions {
  imbalanceRunning?: number;
  stddevFactor?: number;
}

export class AibrixPolicy implements Policy {
  readonly name = 'aibrix';
  readonly imbalanceRunning: number;
  readonly stddevFactor: number;

  constructor(options: AibrixOptions = {}) {
    this.imbalanceRunning = options.imbalanceRunning ?? DEFAULT_AIBRIX_IMBALANCE_RUNNING;
    this.stddevFactor = options.stddevFactor ?? DEFAULT_AIBRIX_STDDEV_FACTOR;
  }

  pick(input: PickInput): Pick {
    const { candidates, request, rng } = input;
    const running = candidates.map((c) => c.inFlight);
    const leastRunning = (): Pick => ({
      replicaId: candidates[argMin(running, rng)]!.id,
      scores: running,
    });
    if (Math.max(...running) - Math.min(...running) > this.imbalanceRunning) return leastRunning();
    const blocks = request.blockKeys.length;
    if (blocks === 0) return leastRunning();
    const mean = running.reduce((a, b) => a + b, 0) / running.length;
    const variance = running.reduce((a, b) => a + (b - mean) ** 2, 0) / running.length;
    const bound = mean + this.stddevFactor * Math.sqrt(variance);
    const matched = candidates
      .filter((c) => c.cachedBlocks > 0)
      .sort((a, b) => b.cachedBlocks - a.cachedBlocks || a.inFlight - b.inFlight || a.id - b.id);
    const chosen = matched.find((c) => c.inFlight <= bound);
    if (!chosen) return leastRunning();
    return { replicaId: chosen.id, scores: candidates.map((c) => (100 * c.cachedBlocks) / blocks) };
  }
}
