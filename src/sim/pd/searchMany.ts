/**
 * Many P/D split searches (`PdSearcher.searchDisaggregated`), one per config: in this thread, or
 * each a task on `SimPool`'s worker threads, with the same answers (every run is deterministic
 * in its seed). Each search is a progress task whose fraction is its probes made over the
 * expected count, with the split it probes.
 */
import type { SloTargets } from '../../results/slo.ts';
import type { BatchProgress } from '../parallel.ts';
import type { SimConfig } from '../run.ts';
import { type PdSearchOutcome, type PdSearchTask, SimPool } from '../workerPool.ts';
import { expectedPdProbes, PdSearcher } from './runPd.ts';

export interface PdSearchItem {
  label: string;
  config: SimConfig;
  slo: SloTargets;
  transferGbps: number;
  transferLatencyMs: number;
  maxReplicas: number;
  spare?: number;
}

const taskOf = (item: PdSearchItem): PdSearchTask => ({
  slo: item.slo,
  transferGbps: item.transferGbps,
  transferLatencyMs: item.transferLatencyMs,
  maxReplicas: item.maxReplicas,
  ...(item.spare !== undefined && { spare: item.spare }),
});

export async function runPdSearches(
  items: readonly PdSearchItem[],
  threads: number,
  progress?: BatchProgress,
): Promise<PdSearchOutcome[]> {
  if (items.length === 0) return [];
  const workers = Math.min(threads, items.length);
  progress?.phase(workers > 1 ? `P/D searches on ${workers} threads` : 'P/D searches', {
    total: items.length,
    unit: 'P/D searches',
    of: 'expected probes',
  });
  if (workers <= 1) {
    return items.map((item) => {
      const task = progress?.task(`P/D ${item.label}`);
      const expected = expectedPdProbes(item);
      const searcher = new PdSearcher(item.config, {
        ...taskOf(item),
        onProbe: (probes, split) =>
          task?.update(Math.min(0.99, (probes - 1) / expected), `P:D ${split}`),
      });
      const found = searcher.searchDisaggregated(item.slo);
      task?.end();
      return { ...found, probes: searcher.probes };
    });
  }
  const pool = new SimPool(workers);
  try {
    const out: PdSearchOutcome[] = new Array(items.length);
    let next = 0;
    // Each worker takes the next search as its last one ends.
    const lane = async (): Promise<void> => {
      while (next < items.length) {
        const i = next++;
        const item = items[i]!;
        const task = progress?.task(`P/D ${item.label}`);
        out[i] = await pool.runPdSearch(item.config, taskOf(item), (f, d) => task?.update(f, d));
        task?.end();
      }
    };
    await Promise.all(Array.from({ length: workers }, lane));
    return out;
  } finally {
    await pool.close();
  }
}
