/** Plain-text summary of bench results (the simulator's columns a client can measure). */
import type { BenchResult } from './result.ts';
import { LATENCY_HEAD, latencyCells } from '../sim/table.ts';
import { grid, n0, n1, pct } from '../util/textTable.ts';

export function formatBench(results: BenchResult[]): string {
  const head = ['policy', 'replicas', ...LATENCY_HEAD, 'E2E p50', 'hit rate', 'done', 'errors'];
  const rows = results.map((r) => [
    r.policy ?? '-',
    r.replicas === null ? '-' : String(r.replicas),
    ...latencyCells(r),
    n0(r.e2eMs.p50),
    pct(r.hitRate),
    String(r.completed),
    String(r.errors),
  ]);
  const lines = [grid(head, rows)];
  for (const r of results) {
    const who = r.policy ?? 'bench';
    const kinds = Object.entries(r.errorsByKind);
    if (kinds.length > 0)
      lines.push(`${who}: errors ${kinds.map(([k, v]) => `${k} ${v}`).join(', ')}`);
    if (r.cancelled > 0) lines.push(`${who}: ${r.cancelled} cancelled in flight (interrupted)`);
    if (r.promptMismatches > 0) {
      lines.push(`${who}: ${r.promptMismatches} prompts counted differently by the server`);
    }
    const scale = r.speedup === 1 ? '' : `; latencies x ${r.speedup} (speedup) to workload ms`;
    lines.push(
      `${who}: ${r.arrived} sent in ${n1(r.wallS)} s wall, send lag p99 ${n1(r.sendLagMs.p99)} ms${scale}`,
    );
  }
  return lines.join('\n');
}
