/**
 * The table in docs/benchmarks.md (Simulator notebook): the seed workload, aggregated vs the best P:D split, the fewest
 * GPUs meeting TTFT p99 {570 ms, 1 s} x TPOT p99 {25, 40, 100 ms}, the link at 25 and 100 GB/s.
 *   node --import tsx bench/pdTable.ts [--duration S] [--warmup S] [--max-replicas N]
 * Prints one JSON line per cell (the `--search --pd auto` shape) and a Markdown table.
 */
import { ENGINE_DEFAULTS } from '../src/engine/options.ts';
import { DEFAULT_POLICY } from '../src/router/defaults.ts';
import { PdSearcher } from '../src/sim/pd/runPd.ts';
import type { SimConfig } from '../src/sim/run.ts';
import { readBenchArgs } from './flags.ts';

const values = readBenchArgs('pdTable', {
  duration: { type: 'string' },
  warmup: { type: 'string' },
  'max-replicas': { type: 'string' },
});
const durationS = Number(values.duration ?? 120);
const warmupS = Number(values.warmup ?? 20);
const maxReplicas = Number(values['max-replicas'] ?? 48);
const base: SimConfig = {
  workload: { kind: 'synthetic', name: 'seed' } as SimConfig['workload'],
  seed: 1,
  durationMs: durationS * 1000,
  warmupMs: warmupS * 1000,
  replicas: 22,
  engine: { ...ENGINE_DEFAULTS },
  router: { policy: DEFAULT_POLICY, index: 'events', queueSource: 'ledger' } as SimConfig['router'],
  view: { staleMs: 0, reportMs: 100, eventDelayMs: 0 },
  faults: [],
  // Aggregated probes stop once the loosest SLO is out of reach (the search's own early stop):
  // a probe stopped early misses every tighter one too, so its runs serve every cell.
  slo: { ttftP99Ms: 1000, tpotP99Ms: 100 },
  earlyStop: true,
};
const rows: string[] = [];
for (const gbps of [25, 100]) {
  const searcher = new PdSearcher(base, { transferGbps: gbps, transferLatencyMs: 1, maxReplicas });
  for (const ttft of [570, 1000]) {
    for (const tpot of [25, 40, 100]) {
      const s = searcher.search({ ttftP99Ms: ttft, tpotP99Ms: tpot });
      process.stdout.write(
        `${JSON.stringify({ gbps, ttft, tpot, pd: { aggregated: s.aggregated, disaggregated: s.disaggregated }, probes: s.probes })}\n`,
      );
      const a = s.aggregated
        ? `${s.aggregated.replicas} (${s.aggregated.gpus})`
        : `none <= ${maxReplicas}`;
      const d = s.disaggregated
        ? `${s.disaggregated.prefill}:${s.disaggregated.decode} (${s.disaggregated.gpus})`
        : `none <= ${maxReplicas}`;
      rows.push(`| ${gbps} GB/s | ${ttft} ms | ${tpot} ms | ${a} | ${d} |`);
    }
  }
}
process.stdout.write(
  [
    '',
    '| link | TTFT p99 | TPOT p99 | aggregated replicas (GPUs) | best P:D (GPUs) |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n'),
);
